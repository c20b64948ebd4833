"""Inspect AI scorers: veriscale's fine-grained reward and progress curve as Inspect ``Score`` objects.

    from veriscale.integrations.inspect import veriscale_scorer, veriscale_progress
    Task(dataset=..., solver=generate(), scorer=[veriscale_scorer(criteria="general"), veriscale_progress()])

``veriscale_scorer`` scores the sample's final output against its input (``state.input_text``):
the Score's value is the reward in [0, 1], its explanation says why, its metadata holds what
``veriscale score --json`` prints (per-criterion rewards and label distributions, low label mass,
the injection flag; not the raw readings) plus ``store`` and ``run_id``: the store run whose model
calls made the verdict (``veriscale runs show RUN_ID --store STORE``). ``veriscale_progress``
tracks the sample's message history (steps after the first user message, which is the task): the
value is the last checkpoint's progress, the metadata the curve and its VOC.

Both are async and await veriscale on Inspect's own event loop (the progress curve runs in a worker
thread, as :func:`veriscale.track` is synchronous). A sample with no output, or a verdict whose model
calls failed, is recorded as Inspect's unscored Score (value NaN, skipped by metrics and reducers)
with one sentence in its explanation. Arguments left None take veriscale's settings (the
environment, e.g. ``VERISCALE_MODEL``, ``VERISCALE_STORE``), then the built-in defaults.
"""

from __future__ import annotations

import asyncio
import math
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any, AsyncIterator

from veriscale.integrations import require_inspect

require_inspect()

from inspect_ai.model import ChatMessage  # noqa: E402
from inspect_ai.scorer import Score, Scorer, Target, mean, scorer, stderr  # noqa: E402
from inspect_ai.solver import TaskState  # noqa: E402

from veriscale.engine.run_scope import RunHandle, recorded_run  # noqa: E402
from veriscale.engine.store import Store, default_store_path  # noqa: E402
from veriscale.errors import UserError  # noqa: E402
from veriscale.integrations.verdict_text import reason_for  # noqa: E402
from veriscale.selection.budget.form import parse_budget  # noqa: E402

#: the explanation of a sample the solver gave no output for
NO_OUTPUT = "the sample has no output to verify: its solver produced no completion, so it is left unscored"
#: what ``--json`` prints of a verdict and the Score's metadata keeps (the readings stay in the store)
KEPT = ("reward", "reward_se", "model", "scale", "criteria_set", "repeats_requested", "repeats_effective",
        "failed", "errors", "low_label_mass", "notes", "usage", "injection_suspected", "injection")


def model_uri(model: str | None) -> str:
    """The verifier's model URI: ``model``, else veriscale's model setting (``VERISCALE_MODEL``), else embedded."""
    if model:
        return model
    from veriscale import settings

    chosen = settings.value("model")
    return chosen[0] if chosen else "embedded"


def store_path(store: str | Path | None) -> Path:
    """Where the runs are recorded: ``store``, else ``VERISCALE_STORE``, else the per-user store."""
    return Path(store).expanduser() if store else default_store_path()


def max_calls(budget: int | str | None) -> int | None:
    """The most model calls per sample: ``"calls=N"`` (the form of ``veriscale_best`` and the ``budget``
    setting) or the number N; a token budget or anything else is one sentence.

        max_calls("calls=12")   # 12
        max_calls(12)           # 12
    """
    if budget is None:
        return None
    if isinstance(budget, int) and not isinstance(budget, bool) and budget >= 1:
        return budget
    if isinstance(budget, str):
        with suppress(UserError):  # not a budget at all: the sentence below
            parsed = parse_budget(budget)
            if parsed.kind == "calls":
                return parsed.amount
    raise UserError(f"veriscale_scorer(budget={budget!r}) is not allowed: a pointwise score is limited in model "
                    "calls per sample, so give budget=\"calls=N\" with N >= 1 (e.g. \"calls=12\")")


@asynccontextmanager
async def opened(model: str | None, store: str | Path | None, command: str,
                 args: dict[str, Any]) -> AsyncIterator[tuple[Any, Store, RunHandle]]:
    """The backend, the store and a recorded run current for the block (its calls are linked to it);
    the store is closed and a server backend's client too (the embedded model is the process's one)."""
    from veriscale.models.abilities import aclose_backend
    from veriscale.models.uri import load_backend
    from veriscale.models.weak_judge import warn_if_embedded

    backend = await asyncio.to_thread(load_backend, model_uri(model))
    warn_if_embedded(backend, stacklevel=4)  # the embedded model is a weak judge: said as the CLI says it
    st = await asyncio.to_thread(Store.open, store_path(store))
    try:
        with recorded_run(st, command, backend.uri, {**args, "via": "inspect"}) as run:
            yield backend, st, run
    finally:
        await asyncio.to_thread(st.close)
        if not backend.is_embedded:
            await aclose_backend(backend)


@scorer(metrics=[mean(), stderr()], name="veriscale")
def veriscale_scorer(criteria: str = "general", scale: str = "letters", repeats: int | None = None,
                     model: str | None = None, budget: str | int | None = None, store: str | None = None) -> Scorer:
    """veriscale's fine-grained reward of the sample's output (module docstring).

    ``criteria``: a built-in pack or a Markdown file; ``scale``: e.g. "letters", "digits:10";
    ``repeats``: reads per criterion; ``model``: a model URI (default: veriscale's setting, else the
    embedded model, a weak judge); ``budget``: the most model calls per sample, ``"calls=N"`` as
    ``veriscale_best`` takes it (or N); ``store``: the store file.
    """
    limit = max_calls(budget)

    async def score(state: TaskState, target: Target) -> Score:
        from veriscale.verify.reward import Verifier

        answer = state.output.completion if state.output is not None else ""
        if not answer.strip():
            return Score.unscored(reason="no_response", explanation=NO_OUTPUT)
        task = state.input_text
        async with opened(model, store, "score", {"sample": str(state.sample_id), "epoch": state.epoch,
                                                  "criteria": criteria}) as (backend, st, run):
            verifier = Verifier(backend, store=st, criteria=criteria, scale=scale, repeats=repeats, max_calls=limit)
            result = await verifier.ascore(task, answer)
            verdict = result.to_dict()
            run.finish("failed" if result.failed else "ok", verdict)
        meta = {key: verdict.get(key) for key in KEPT}
        meta["criteria"] = {name: {k: entry.get(k) for k in ("reward", "label_probs", "label_mass", "low_label_mass")}
                            for name, entry in verdict["criteria"].items()}
        meta.update(store=str(st.path), run_id=run.id, task=task, epoch=state.epoch,
                    settings={"criteria": criteria, "scale": scale, "model": model_uri(model)})  # for veriscale_best
        if result.failed or result.reward is None:
            why = result.errors[0] if result.errors else "no criterion could be read"
            return Score.unscored(reason="grader_failed", answer=answer, metadata=meta,
                                  explanation=f"the verifier's model calls failed, so the sample is unscored: {why}")
        return Score(value=result.reward, answer=answer, explanation=reason_for(verdict), metadata=meta)

    return score


ROLES = {"system": "system", "user": "user", "assistant": "agent", "tool": "tool"}


def steps_of(messages: list[ChatMessage]) -> tuple[str | None, list[Any]]:
    """(the task: the first user message's text, the steps after it) from a sample's message history."""
    from veriscale.data.model import Step

    task, steps = None, []
    for message in messages:
        if message.role == "system":
            continue
        if task is None and message.role == "user":
            task = message.text
            continue
        if message.role == "tool":
            steps.append(Step(role="tool", observation=message.text))
            continue
        calls = [{"name": c.function, "arguments": c.arguments} for c in getattr(message, "tool_calls", None) or []]
        steps.append(Step(role=ROLES.get(message.role, message.role), text=message.text, tool_calls=calls))
    return task, steps


@scorer(metrics=[mean()], name="veriscale_progress")
def veriscale_progress(scale: str | None = None, repeats: int | None = None, every: int | None = None,
                       model: str | None = None, store: str | None = None) -> Scorer:
    """Progress of the sample's message history (module docstring): the value is the last checkpoint's
    progress in [0, 1], the metadata the curve (``curve``: ``veriscale track --json``'s) and ``voc``.
    ``every``: score every Nth step (default every step)."""

    async def score(state: TaskState, target: Target) -> Score:
        from veriscale.progress import ProgressJudge, track

        task, steps = steps_of(state.messages)
        if not any(s.role != "user" for s in steps):  # nothing the agent did: no output to track
            return Score.unscored(reason="no_response", explanation=NO_OUTPUT)
        async with opened(model, store, "track", {"sample": str(state.sample_id), "epoch": state.epoch,
                                                  "steps": len(steps)}) as (backend, st, run):
            options: dict[str, Any] = {k: v for k, v in (("scale", scale), ("repeats", repeats)) if v is not None}
            judge = ProgressJudge(backend, store=st, **options)
            curve = await asyncio.to_thread(track, task or state.input_text, steps, None, judge=judge, every=every)
            payload = curve.to_dict()
            run.finish("ok", {"curves": [payload]})  # as veriscale track --json prints it
        values = [v for v in curve.values() if v is not None and not math.isnan(v)]
        meta = {"curve": payload, "voc": curve.voc, "store": str(st.path), "run_id": run.id}
        if not values:
            return Score.unscored(reason="grader_failed", metadata=meta,
                                  explanation="no checkpoint of the progress curve could be scored: "
                                  + (curve.notes[-1] if curve.notes else "the verifier's model calls failed"))
        voc = "none (too few points)" if curve.voc is None else f"{curve.voc:.2f}"
        return Score(value=values[-1], metadata=meta,
                     explanation=f"progress {values[-1]:.2f} after {len(steps)} steps "
                                 f"({len(values)} checkpoints scored, VOC {voc})")

    return score
