"""Progress tracking: the verifier as a sensor while an agent runs.

    from veriscale.progress import track, ProgressTracker
    curve = track(task, trajectory)                 # offline: every step or chosen checkpoints
    tracker = ProgressTracker(task)                 # online: tracker.update(step) per new step

Data flow: steps -> :mod:`steps` (causal rendering) -> :mod:`prompt` -> :mod:`progress_judge` (the
gateway) -> points -> :mod:`events` and :mod:`voc` -> :class:`~veriscale.progress.curve.ProgressCurve`.
"""

from veriscale.progress.curve import ProgressCurve, ProgressPoint
from veriscale.progress.events import EventWatch, ProgressEvent
from veriscale.progress.progress_judge import ProgressJudge
from veriscale.progress.offline_track import track
from veriscale.progress.tracker import ProgressTracker
from veriscale.progress.voc import value_order_correlation, voc_by_outcome

__all__ = ["EventWatch", "ProgressCurve", "ProgressEvent", "ProgressJudge", "ProgressPoint", "ProgressTracker",
           "track", "value_order_correlation", "voc_by_outcome"]
