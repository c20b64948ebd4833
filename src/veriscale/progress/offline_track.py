"""Offline progress tracking: score a finished trajectory's prefixes and return the curve.

    from veriscale import track
    curve = track("Make the tests pass", trajectory)                  # every step, embedded model
    curve = track(task, trajectory, checkpoints=[5, 10, 20], model="http://127.0.0.1:8000/v1#m")
    curve.values(), curve.voc, [e.kind for e in curve.events]

    plan = plan_track(task, trajectory, judge)       # the calls, before any is sent
    judge.executor.estimate(plan.calls)              # what they would cost
    curve = run_track(plan, judge)

On a Ray cluster each trajectory's curve is a unit of work (:mod:`veriscale.many.units`):
:func:`track_unit` describes it, and the worker builds its own judge from the same options::

    unit = track_unit("track:0", task, candidate, [2, 4], judge_options={"scale": "digits"}, watch={})
    curve, spent = await executor.run_unit(unit, source=judge, run_id=run.id)

Checkpoint t sees steps 1..t only (``veriscale.progress.steps``), and their images: a step's images
right after it, the task's after the task. A run of frames only (a video, a frame folder: images
and no steps) is tracked one step per frame (``veriscale.progress.frame_steps``), so its curve
has a point per frame and checkpoint t sees frames 1..t. All checkpoints' calls go to
the gateway as one plan in step order, so the embedded model's KV cache and a server's prefix
cache carry each prefix to the next checkpoint: the cost grows with the steps, not with
T x prefix.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from veriscale.data.images import ImageRef
from veriscale.data.model import Candidate, Step, Task, Trajectory
from veriscale.engine.sync_facade import CallOutcome, PlannedCall
from veriscale.errors import UserError
from veriscale.models.context import ContextOverflow, learned_context, refit_note
from veriscale.progress.checkpoints import resolve_checkpoints
from veriscale.progress.curve import ProgressCurve
from veriscale.progress.events import EventWatch
from veriscale.progress.frame_steps import left_out_note, tracked_steps
from veriscale.progress.progress_judge import ProgressJudge

TrajectoryLike = Trajectory | Candidate | Sequence[Step]


def steps_of(trajectory: TrajectoryLike) -> list[Step]:
    """The steps of a Trajectory, a Candidate with one (or with frames only: one step per frame), or a
    list of Steps."""
    if isinstance(trajectory, Candidate):
        steps = tracked_steps(trajectory)
        if steps is None and trajectory.trajectory is None:
            raise UserError(f"run '{trajectory.id}' has no trajectory (only a final answer): progress needs its "
                            "steps or its frames")
        return steps or []
    if isinstance(trajectory, Trajectory):
        return list(trajectory.steps)
    steps = list(trajectory)
    if not all(isinstance(s, Step) for s in steps):
        raise UserError("the trajectory must be a Trajectory, a Candidate or a list of Step objects")
    return steps


def task_text_of(task: str | Task | None, trajectory: TrajectoryLike) -> str:
    if isinstance(task, Task):
        return task.text
    if isinstance(task, str):
        return task
    if isinstance(trajectory, Candidate) and trajectory.task is not None:
        return trajectory.task.text
    raise UserError("the task is not given and the run does not say what it was: pass the task text")


def task_images_of(task: str | Task | None, trajectory: TrajectoryLike) -> tuple[ImageRef, ...]:
    """The images the task shows: a Task's own, else (no task given) the run's task's."""
    if isinstance(task, Task):
        return tuple(task.images)
    if task is None and isinstance(trajectory, Candidate) and trajectory.task is not None:
        return tuple(trajectory.task.images)
    return ()


@dataclass
class TrackPlan:
    """The calls that score one trajectory's checkpoints, made before any is sent."""

    trajectory: TrajectoryLike
    task_text: str
    checkpoints: list[int]
    calls: list[PlannedCall]
    n_steps: int
    rerenders: int
    task_images: tuple[ImageRef, ...] = ()
    notes: tuple[str, ...] = ()


def plan_track(task: str | Task | None, trajectory: TrajectoryLike, judge: ProgressJudge,
               checkpoints: Sequence[int] | None = None, every: int | None = None, *,
               task_images: Sequence[ImageRef] | None = None) -> TrackPlan:
    """Render the checkpoints' prompts (causally, step by step) into calls; nothing is sent.
    ``task_images``: shown after the task (default: the Task's, or the run's task's)."""
    steps = steps_of(trajectory)
    chosen = resolve_checkpoints(len(steps), checkpoints, every)
    task_text = judge.fit_task(task_text_of(task, trajectory))
    shown_task = tuple(task_images) if task_images is not None else task_images_of(task, trajectory)
    log = judge.new_log(task_text, shown_task)
    wanted, calls = set(chosen), []
    rerendered = False
    for step in steps[: chosen[-1]]:
        rerendered = log.append(step) or rerendered
        if len(log) in wanted:
            calls += judge.calls_now(task_text, log, rerendered=rerendered)
            rerendered = False
    note = left_out_note(trajectory) if isinstance(trajectory, Candidate) else ""
    return TrackPlan(trajectory, task_text, chosen, calls, len(steps), log.rerenders, shown_task,
                     (note,) if note else ())


def run_track(plan: TrackPlan, judge: ProgressJudge, *, watch: EventWatch | None = None,
              progress: Callable[[CallOutcome], None] | None = None) -> ProgressCurve:
    """Send a plan's calls (in step order) and make the curve, its events and notes; planned once
    more for the context a too-long prompt's reply names."""
    refitted = None
    try:
        points = judge.run(plan.calls, progress=progress)
    except ContextOverflow as overflow:
        context = learned_context(overflow, judge.model)
        if context is None:
            raise
        plan = plan_track(plan.task_text, plan.trajectory, judge, plan.checkpoints, task_images=plan.task_images)
        refitted = refit_note(context, "the steps' budget")
        points = judge.run(plan.calls, progress=progress)
    watch = watch or EventWatch()
    events = [event for point in points for event in watch.push(point.step, point.value)]
    curve = ProgressCurve(task=plan.task_text, model=judge.model.uri, scale=judge.scale.name, points=points,
                          events=events, n_steps=plan.n_steps, rerenders=plan.rerenders,
                          notes=[*judge.notes, *plan.notes])
    if isinstance(plan.trajectory, Candidate):
        curve.trajectory_id, curve.outcome = plan.trajectory.id, _outcome(plan.trajectory)
    if refitted:
        curve.notes.append(refitted)
    if curve.voc_note:
        curve.notes.append(curve.voc_note)
    failed = [p for p in points if p.error]
    if failed:
        curve.notes.append(f"{len(failed)} checkpoint(s) failed and have no score: {failed[0].error}")
    return curve


def track(task: str | Task | None, trajectory: TrajectoryLike, checkpoints: Sequence[int] | None = None,
          repeats: int | None = None, *, every: int | None = None, model: Any = "embedded",
          judge: ProgressJudge | None = None, watch: EventWatch | None = None,
          progress: Callable[[CallOutcome], None] | None = None, **judge_options: Any) -> ProgressCurve:
    """The progress curve of ``trajectory``'s prefixes (see the module docstring).

    ``judge_options`` go to :class:`ProgressJudge` (``store``, ``scale``, ``reasoning``, ...)
    when no ``judge`` is given; ``model`` is a URI or a backend object.
    """
    if judge is None:
        from veriscale.api import _backend

        judge = ProgressJudge(_backend(model), repeats=repeats, **judge_options)
    elif repeats is not None:
        raise UserError("give repeats to the ProgressJudge you pass, not to track() as well")
    return run_track(plan_track(task, trajectory, judge, checkpoints, every), judge, watch=watch, progress=progress)


@dataclass(frozen=True)
class TrackSpec:
    """One trajectory's curve as a unit's spec: the task, the run, its checkpoints, the event thresholds."""

    task: str | Task | None
    trajectory: Candidate
    checkpoints: tuple[int, ...]
    watch: dict[str, Any]


def _progress_judge(options: dict[str, Any], model: Any, store: Any, refresh: bool, concurrency: int,
                    max_calls: int | None) -> ProgressJudge:
    return ProgressJudge(model, store=store, concurrency=concurrency, **{**options, "refresh": refresh,
                                                                          "max_calls": max_calls})


async def _track_work(judge: ProgressJudge, spec: TrackSpec, on_call: Callable[[Any], None]) -> tuple[ProgressCurve, Any]:
    """A trajectory's curve on a worker (a unit's work): :func:`track` with the worker's judge, and what it spent."""
    import asyncio

    from veriscale.engine.usage import Usage

    curve = await asyncio.to_thread(track, spec.task, spec.trajectory, list(spec.checkpoints), judge=judge,
                                    watch=EventWatch(**spec.watch), progress=on_call)
    return curve, Usage(**judge.usage.counters())


def track_unit(key: str, task: str | Task | None, trajectory: Candidate, checkpoints: Sequence[int], *,
               judge_options: dict[str, Any], watch: dict[str, Any], seed_keys: Sequence[str] = ()) -> Any:
    """One trajectory's curve as a unit of work for an executor (its result: ``(curve, usage)``).
    ``judge_options``: :class:`ProgressJudge`'s keywords (``scale``, ``repeats``, ``reasoning``, ...);
    ``seed_keys``: the keys of the calls its plan makes (a rerun's seeds, when the store has them)."""
    import functools

    from veriscale.many.units import Unit

    return Unit(key=key, work=_track_work, spec=TrackSpec(task, trajectory, tuple(checkpoints), dict(watch)),
                judge=functools.partial(_progress_judge, dict(judge_options)), command="track",
                args={"trajectory": trajectory.id}, seed_keys=tuple(seed_keys))


def _outcome(candidate: Candidate) -> Any:
    for key in ("reward", "resolved", "success", "score", "first_error"):
        if key in candidate.labels:
            return candidate.labels[key]
    return None
