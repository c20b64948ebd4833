"""The progress judge: one model, scale and repeat count; turns step logs into scored points.

Every call goes through the gateway (``veriscale.engine``): cached, counted, linked to the run.
Offline tracking (:func:`veriscale.progress.offline_track.track`) and the live tracker share it::

    judge = ProgressJudge(load_backend("embedded"), store=Store.open())
    log = judge.new_log(task_text)
    log.append(step)
    point = judge.score_now(task_text, log)        # the prefix that ends at the newest step

Budgets: each step is rendered within ``step_tokens`` and the shown steps within the room the
model's context leaves after the instructions and task (at most ``budget_tokens`` when given).
The embedded model gets small defaults so a CPU can follow a run as it happens.

Images: ``new_log(task_text, task_images)`` reads the task's images (shown after the task, their
cost taken from the steps' room); each step's images travel in the log (``veriscale.progress.steps``).
Every point records the images its judgement saw (``ProgressPoint.frames``: label, digest, size,
time and the step each belongs to, never the bytes), for the dashboard's filmstrip.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from veriscale.models.vision_probe import image_token_cost
from veriscale.models.vision import require_vision
from veriscale.data.images import ImageRef, load_images
from veriscale.data.render import MIN_BUDGET_TOKENS
from veriscale.data.truncate import truncate_middle
from veriscale.engine.sync_facade import CallExecutor, CallOutcome, PlannedCall
from veriscale.engine.store import Store
from veriscale.errors import UserError, setting, worded
from veriscale.models.base import ModelBackend
from veriscale.progress.curve import ProgressPoint
from veriscale.progress.prompt import (DEFAULT_PROGRESS_SCALE, PROGRESS_PROMPT_VERSION, SYSTEM, head_text,
                                       progress_request, progress_scale, question_text)
from veriscale.progress.steps import StepLog, images_tokens
from veriscale.verify.repeats import distinct_repeats
from veriscale.verify.scale import Scale

EMBEDDED_STEP_TOKENS, SERVER_STEP_TOKENS = 160, 500
EMBEDDED_STEPS_BUDGET, SERVER_STEPS_BUDGET = 3000, 12000
TASK_SHARE = 0.25  # the task takes at most this share of the context
RESERVE_TOKENS = 64  # chat template and prefill


@dataclass(frozen=True)
class _Tag:
    step: int
    repeat: int
    rerendered: bool
    frames: tuple[dict[str, Any], ...] = ()  # what the prompt showed of its images (ImagePart.shown + step)


class ProgressJudge:
    """Scores trajectory prefixes on a progress scale; see the module docstring."""

    def __init__(self, model: ModelBackend, *, store: Store | None = None,
                 scale: Scale | str = DEFAULT_PROGRESS_SCALE, repeats: int | None = None,
                 reasoning: bool = False, discrete: bool = False, seed: int = 0,
                 budget_tokens: int | None = None, step_tokens: int | None = None,
                 max_calls: int | None = None, concurrency: int = 4, refresh: bool = False) -> None:
        if repeats is not None and (not isinstance(repeats, int) or repeats < 1):
            raise UserError(f"repeats {repeats!r} ({setting('repeats')}) is not allowed: use 1 or more")
        self.model = model
        self.scale = progress_scale(scale)
        self.reasoning, self.discrete, self.seed = reasoning, discrete, seed
        self.repeats = distinct_repeats(repeats or 1, pairwise=False, reasoning=reasoning, seed=seed)
        self.notes: list[str] = []
        if repeats and len(self.repeats) < repeats:
            self.notes.append(worded(f"K collapsed from {repeats} to {len(self.repeats)}: without sampled reasoning a "
                                     f"repeat would recompute the same thing (use {setting('reasoning')} to sample anew)"))
        embedded = bool(model.is_embedded)
        self.step_tokens = step_tokens or (EMBEDDED_STEP_TOKENS if embedded else SERVER_STEP_TOKENS)
        if self.step_tokens < MIN_BUDGET_TOKENS:
            raise UserError(f"step budget {self.step_tokens} ({setting('step_tokens')}) is too small: "
                            f"give at least {MIN_BUDGET_TOKENS} tokens per step")
        self.budget_tokens = budget_tokens
        self._default_steps_budget = EMBEDDED_STEPS_BUDGET if embedded else SERVER_STEPS_BUDGET
        self.executor = CallExecutor(model, store, prompt_version=PROGRESS_PROMPT_VERSION, refresh=refresh,
                                     max_calls=max_calls, concurrency=concurrency)
        self._labels_checked = False

    @property
    def usage(self):
        return self.executor.usage

    def count_tokens(self, text: str) -> int:
        return self.model.count_tokens(text)

    def check_labels(self) -> None:
        if self._labels_checked:
            return
        bad = self.model.single_token_labels(self.scale.labels)
        if bad:
            raise UserError(f"progress labels {', '.join(bad)} of scale '{self.scale.name}' are not single tokens "
                            f"for {self.model.display_name}: use {setting('scale', 'digits')} or {setting('scale', 'letters:11')}")
        self._labels_checked = True

    # -- layout ------------------------------------------------------------------------------
    def fit_task(self, task: str) -> str:
        """The task as the prompt shows it: whole, or its middle elided to a quarter of the context."""
        if not isinstance(task, str) or not task.strip():
            raise UserError("the task is empty: give the text the agent was asked to do")
        context = self._context()
        return truncate_middle(task.strip(), int(context * TASK_SHARE), self.count_tokens) if context else task.strip()

    def _context(self) -> int | None:
        return self.model.context_size()

    def new_log(self, task_text: str, task_images: Sequence[ImageRef] = ()) -> StepLog:
        """An empty step log whose budget is what the context leaves after ``task_text`` (and the
        task's images, read here and shown after it)."""
        shown_task = load_images(list(task_images)) if task_images else ()
        per_image = image_token_cost(self.executor.store, self.model)[0]  # measured by models check, else a guess
        fixed = self.count_tokens("\n".join([SYSTEM, head_text(task_text, self.scale, reasoning=self.reasoning),
                                             question_text(self.scale), "Progress:"])) + RESERVE_TOKENS
        if shown_task:
            fixed += images_tokens(shown_task, self.count_tokens, per_image)
        if self.reasoning:
            fixed += 256 + 8
        context = self._context()
        room = context - fixed if context else None
        budget = self.budget_tokens or (self._default_steps_budget if room is None else min(self._default_steps_budget, room))
        if self.budget_tokens is not None and room is not None and self.budget_tokens > room:
            raise UserError(f"{setting('budget_tokens')} {self.budget_tokens} does not fit the model's {context}-token "
                            f"context with the instructions and task: use at most {room}")
        if budget < 2 * self.step_tokens:
            raise UserError(f"the steps get {max(budget, 0)} tokens but one step may take {self.step_tokens}: lower "
                            f"{setting('step_tokens')}, shorten the task or use a model with a longer context")
        return StepLog(count_tokens=self.count_tokens, budget_tokens=budget, step_tokens=self.step_tokens,
                       task_images=shown_task, image_tokens=per_image)

    # -- scoring -----------------------------------------------------------------------------
    def calls_now(self, task_text: str, log: StepLog, *, rerendered: bool = False) -> list[PlannedCall]:
        """The calls that score the prefix ending at the log's newest step (one per repeat)."""
        parts = log.shown()
        frames = shown_frames(log)
        require_vision(self.model, bool(frames))  # the embedded model says it cannot see, before any call
        return [PlannedCall(progress_request(task_text, parts, self.scale, reasoning=self.reasoning, seed=rep.seed,
                                             task_images=log.task_images),
                            _Tag(len(log), rep.index, rerendered, frames)) for rep in self.repeats]

    def run(self, calls: Sequence[PlannedCall], progress=None) -> list[ProgressPoint]:
        """Answer ``calls`` (in order: the embedded model reuses each prefix) and group them into points."""
        self.check_labels()
        return self.points(self.executor.run(calls, progress=progress))

    async def arun(self, calls: Sequence[PlannedCall]) -> list[ProgressPoint]:
        """:meth:`run` for async callers (the gateway runs on its own loop; this awaits it)."""
        await asyncio.to_thread(self.check_labels)
        return self.points(await self.executor.gateway.run(calls))

    def point_feed(self, on_point: Callable[[ProgressPoint], None]) -> Callable[[CallOutcome], None]:
        """A ``progress`` callback for :meth:`run` that hands each checkpoint's point to ``on_point``
        as soon as all its repeats are in (a live curve while a long plan runs)."""
        pending: dict[int, list[CallOutcome]] = {}

        def feed(outcome: CallOutcome) -> None:
            step = outcome.call.tag.step
            group = pending.setdefault(step, [])
            group.append(outcome)
            if len(group) == len(self.repeats):
                on_point(self._point(step, pending.pop(step)))

        return feed

    def points(self, outcomes: Sequence[CallOutcome]) -> list[ProgressPoint]:
        by_step: dict[int, list[CallOutcome]] = {}
        for outcome in outcomes:
            by_step.setdefault(outcome.call.tag.step, []).append(outcome)
        return [self._point(step, group) for step, group in by_step.items()]

    def _point(self, step: int, outcomes: list[CallOutcome]) -> ProgressPoint:
        point = ProgressPoint(step=step, value=None, repeats=len(outcomes),
                              rerendered=any(o.call.tag.rerendered for o in outcomes),
                              frames=[dict(f) for f in outcomes[0].call.tag.frames] if outcomes else [])
        values, probs, masses = [], [], []
        for o in outcomes:
            resp = o.response
            point.cache_hits += int(o.cache_hit)
            if resp is None:
                point.error = o.error or "the model call failed"
                continue
            point.prompt_tokens += 0 if o.cache_hit else resp.prompt_tokens
            point.prompt_tokens_total += resp.prompt_tokens_total
            point.completion_tokens += resp.completion_tokens
            point.latency_s += resp.latency_s
            if resp.label_mass <= 0:
                point.error = "no probability on any progress label (the model answered off-format)"
                continue
            values.append(self.scale.argmax_value(resp.label_probs) if self.discrete
                          else self.scale.expectation(resp.label_probs))
            probs.append(resp.label_probs)
            masses.append(resp.label_mass)
        if point.error is None and values:
            point.value = sum(values) / len(values)
            point.label_probs = {lab: sum(p.get(lab, 0.0) for p in probs) / len(probs) for lab in self.scale.labels}
            point.label_mass = sum(masses) / len(masses)
        return point


def shown_frames(log: StepLog) -> tuple[dict[str, Any], ...]:
    """What a prompt made from ``log`` now shows of its images, in order: each one's
    ``ImagePart.shown()`` record and ``step``, the step it belongs to ("task" for the task's)."""
    out: list[dict[str, Any]] = [{**img.shown(), "step": "task"} for img in log.task_images]
    first = log.elided_through + 1
    for number in [1, *range(max(first, 2), len(log) + 1)]:
        if number <= len(log):
            out += [{**img.shown(), "step": number} for img in log.images[number - 1]]
    return tuple(out)
