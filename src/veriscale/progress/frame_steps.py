"""A run that is frames only (a video, a folder of frames, a robot rollout) as steps to track.

A candidate imported from an MP4 or a frame folder has its frames in ``Candidate.images`` and no
steps. Progress is tracked over the frames in order, one step per frame, whose text is the
frame's label ("frame 3 at 1.20 s"), so the curve has one point per frame (or per chosen
checkpoint) and checkpoint t sees frames 1..t only::

    steps = frame_steps(candidate.images)       # [Step(role="environment", text="frame 1 at 0.00 s", images=[f1]), ...]
    tracked_steps(candidate)                    # its steps, or its frames as steps when it has no steps

A candidate with steps keeps its steps: images tied to a step (``Step.images``) are shown with
that step; images only the candidate carries are not shown (``left_out_note``), since nothing says
when each was taken and showing them at every checkpoint would show early checkpoints later states.
"""

from __future__ import annotations

from collections.abc import Sequence

from veriscale.data.images import ImageRef
from veriscale.data.model import Candidate, Step, Trajectory

FRAME_ROLE = "environment"


def frame_text(number: int, ref: ImageRef) -> str:
    """A frame step's text: its label, else "frame N" (and its time, where known)."""
    if ref.label:
        return ref.label
    return f"frame {number}" + (f" at {ref.at_s:.2f} s" if ref.at_s is not None else "")


def frame_steps(frames: Sequence[ImageRef]) -> list[Step]:
    """One step per frame, in order, each showing its frame."""
    return [Step(role=FRAME_ROLE, text=frame_text(n, ref), images=[ref]) for n, ref in enumerate(frames, 1)]


def has_steps(candidate: Candidate) -> bool:
    return candidate.trajectory is not None and bool(candidate.trajectory.steps)


def tracked_steps(candidate: Candidate) -> list[Step] | None:
    """What progress is tracked over: the candidate's steps, or one step per frame when it has frames
    and no steps; None when it has neither."""
    if has_steps(candidate):
        assert candidate.trajectory is not None
        return list(candidate.trajectory.steps)
    if candidate.images:
        return frame_steps(candidate.images)
    return None


def with_frame_steps(candidate: Candidate) -> Candidate:
    """``candidate``, a run of frames only (a video, a frame folder) given a trajectory of one step per
    frame, so every command that tracks steps tracks its frames (a run with steps is left as it is)."""
    if not has_steps(candidate) and candidate.images:
        candidate.trajectory = Trajectory(steps=frame_steps(candidate.images))
    return candidate


def shows_frames(candidates: Sequence[Candidate]) -> bool:
    """Whether tracking these runs shows the judge any image (a step's, or a run's task's)."""
    return any((c.task is not None and c.task.images) or
               (c.trajectory is not None and any(step.images for step in c.trajectory.steps)) for c in candidates)


def left_out_note(candidate: Candidate) -> str:
    """A note when some of the candidate's own images are not shown (it has steps, and they do not show them)."""
    if not (candidate.images and has_steps(candidate)):
        return ""
    assert candidate.trajectory is not None
    with_steps = {ref for s in candidate.trajectory.steps for ref in s.images}
    n = sum(1 for ref in candidate.images if ref not in with_steps)
    if not n:
        return ""
    return (f"the run's {n} image{'s' if n != 1 else ''} belong to no step and are not shown: tracking "
            "follows its steps, and an image without a step could show a checkpoint a later state")


__all__ = ["FRAME_ROLE", "frame_steps", "frame_text", "has_steps", "left_out_note", "tracked_steps"]
