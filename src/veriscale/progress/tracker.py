"""Online progress tracking: one new score per step while an agent runs.

    tracker = ProgressTracker("Make the tests pass", model="http://127.0.0.1:8000/v1#m")
    point = tracker.update(Step(role="agent", text="ran pytest", observation="3 failed"))
    point.value, tracker.new_events            # events of this step: stall, regression, likely_done
    point = await tracker.aupdate(step)        # from async code
    tracker.curve.voc, tracker.curve.sparkline()

Each update scores the prefix that ends at the new step; the prompt extends the previous one,
so the embedded model and server prefix caches process only the new step. ``on_event`` is
called with each event as it happens.

A step may carry images (``Step.images``, or ``"images"`` in a step object: paths, data URLs or
``{"source": ..., "label": ...}``; see ``veriscale.progress.step_records``), shown after the step;
a step may be images only (a robot's camera frame). As with text, the score after step t sees
steps 1..t and their images only, and each point records the images it saw (``point.frames``)::

    point = tracker.update({"role": "environment", "images": ["cam/0007.png"]})
    [f["label"] for f in point.frames]
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from typing import Any

from veriscale.data.model import Step, Task
from veriscale.errors import UserError
from veriscale.progress.curve import ProgressCurve, ProgressPoint
from veriscale.progress.events import EventWatch, ProgressEvent
from veriscale.progress.progress_judge import ProgressJudge
from veriscale.progress.step_records import RecordError, step_from_record


class ProgressTracker:
    """Follows one running trajectory; see the module docstring."""

    def __init__(self, task: str | Task, *, model: Any = "embedded", judge: ProgressJudge | None = None,
                 watch: EventWatch | None = None, on_event: Callable[[ProgressEvent], None] | None = None,
                 **judge_options: Any) -> None:
        if judge is None:
            from veriscale.api import _backend

            judge = ProgressJudge(_backend(model), **judge_options)
        self.judge = judge
        self.task_text = judge.fit_task(task.text if isinstance(task, Task) else task)
        self.log = judge.new_log(self.task_text, task.images if isinstance(task, Task) else ())
        self.watch = watch or EventWatch()
        self.on_event = on_event
        self.curve = ProgressCurve(task=self.task_text, model=judge.model.uri, scale=judge.scale.name,
                                   notes=list(judge.notes))
        self.new_events: list[ProgressEvent] = []
        self._lock = threading.Lock()
        self._alock: asyncio.Lock | None = None

    def _add(self, step: Step | Mapping[str, Any]):
        if not isinstance(step, Step):
            try:
                step = step_from_record(step)
            except RecordError as exc:
                raise UserError(f"step {len(self.log) + 1} is not a step object ({exc}): see veriscale.progress.step_records") from None
        rerendered = self.log.append(step)
        self.curve.n_steps = len(self.log)
        self.curve.rerenders = self.log.rerenders
        return self.judge.calls_now(self.task_text, self.log, rerendered=rerendered)

    def _finish(self, point: ProgressPoint) -> ProgressPoint:
        self.curve.points.append(point)
        self.new_events = self.watch.push(point.step, point.value)
        self.curve.events.extend(self.new_events)
        for event in self.new_events:
            if self.on_event is not None:
                self.on_event(event)
        return point

    def update(self, step: Step | Mapping[str, Any]) -> ProgressPoint:
        """Add the agent's next step and score the prefix it ends (blocking)."""
        with self._lock:
            calls = self._add(step)
            return self._finish(self.judge.run(calls)[0])

    async def aupdate(self, step: Step | Mapping[str, Any]) -> ProgressPoint:
        """:meth:`update` for async code; concurrent updates are scored in the order they came."""
        if self._alock is None:
            self._alock = asyncio.Lock()
        async with self._alock:
            calls = self._add(step)
            return self._finish((await self.judge.arun(calls))[0])
