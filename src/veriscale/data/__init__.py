"""Tasks, candidates and trajectories, and the importers that read them."""

from veriscale.data.model import Candidate, Step, Task, Trajectory

__all__ = ["Candidate", "Step", "Task", "Trajectory"]
