"""One task's decision inside ``select-many``: a Best-of-N selection recorded as its own store run,
its outcome as a :class:`~veriscale.many.picks_file.PickRecord`.

    job = DecisionJob("t1", Task("Fix the bug", id="t1"), tuple(runs))
    record = await adecide(job, verifier=v, settings=SelectionSettings(), parent=run.id)
    record.pick, record.confidence, record.cost["model_calls"]

A failure of the task's own (a model call that failed, a comparison with no verdict, input the
selection refuses) becomes the record's ``error``, one sentence, never a pick; the other tasks go on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from veriscale.data.model import Candidate, Task
from veriscale.engine.run_log import RunLog
from veriscale.engine.run_scope import recorded_run
from veriscale.engine.usage import Usage, usage_tap
from veriscale.errors import ModelCallError, UserError, one_line
from veriscale.many.picks_file import PickRecord
from veriscale.many.units import Unit, verifier_recipe
from veriscale.selection.settings import SelectionSettings


@dataclass(frozen=True)
class DecisionJob:
    """What one decision needs: the task's key in picks.jsonl, the task, and its runs."""

    key: str
    task: Task
    candidates: tuple[Candidate, ...]


def cost_of(spent: Usage) -> dict[str, Any]:
    """The ``cost`` field of a pick line."""
    return {"model_calls": spent.model_calls, "cache_hits": spent.cache_hits, "failed_calls": spent.failed_calls,
            "prompt_tokens": spent.prompt_tokens, "completion_tokens": spent.completion_tokens}


async def apick(job: DecisionJob, *, verifier: Any, settings: SelectionSettings,
                on_call: Callable[[Any], None] | None = None) -> tuple[PickRecord, dict[str, Any] | None]:
    """The selection among ``job``'s runs on the running loop, in no run of its own: the record (no
    ``run_id`` yet) and the selection as a run records it (None when the task failed: ``error``)."""
    from veriscale.selection.select import aselect

    with usage_tap() as spent:
        try:
            progress = None if on_call is None else (lambda done, planned: on_call(None))
            sel = await aselect(job.task, job.candidates, verifier=verifier, settings=settings, on_progress=progress)
        except (UserError, ModelCallError) as exc:  # SelectionFailed is a ModelCallError
            return PickRecord(task=job.key, n_candidates=len(job.candidates), method=settings.method,
                              cost=cost_of(spent), error=one_line(str(exc))), None
    record = PickRecord(task=job.key, pick=sel.best.id, confidence=sel.confidence, decided=sel.decided,
                        ranking=[sel.candidates[i].id for i in sel.ranking], n_candidates=len(job.candidates),
                        method=sel.method, cost=cost_of(spent), notes=list(sel.notes))
    return record, sel.to_dict()


def run_args(job: DecisionJob, verifier: Any, settings: SelectionSettings, parent: int | None) -> dict[str, Any]:
    """The arguments a decision's ``select`` run records."""
    return {"task": job.key, "method": settings.method, "k": settings.k, "criteria": verifier.criteria.name,
            "select_many": parent}


async def _decision_work(verifier: Any, spec: tuple[DecisionJob, SelectionSettings],
                         on_call: Callable[[Any], None]) -> tuple[PickRecord, dict[str, Any] | None]:
    """A decision as a unit's work (:mod:`veriscale.many.units`): :func:`apick` on the worker."""
    job, settings = spec
    return await apick(job, verifier=verifier, settings=settings, on_call=on_call)


def decision_unit(job: DecisionJob, verifier: Any, settings: SelectionSettings) -> Unit:
    """``job``'s decision as a unit of work for an executor (its key: the task's)."""
    return Unit(key=job.key, work=_decision_work, spec=(job, settings), judge=verifier_recipe(settings),
                command="select", args=run_args(job, verifier, settings, None), retry_errors=True)


async def adecide(job: DecisionJob, *, verifier: Any, settings: SelectionSettings, parent: int | None = None,
                  on_call: Callable[[Any], None] | None = None) -> PickRecord:
    """:func:`apick` as a ``select`` run under ``parent`` in the verifier's store."""
    store = verifier.executor.store
    with recorded_run(store, "select", verifier.model.uri, run_args(job, verifier, settings, parent),
                      parent=parent) as run:
        RunLog(run.store).record_candidates(run.id, job.candidates)
        record, result = await apick(job, verifier=verifier, settings=settings, on_call=on_call)
        record.run_id = run.id
        run.finish("ok" if record.error is None else "failed", result if result is not None else
                   {"error": record.error})
    return record
