"""``select-many``: one Best-of-N decision per task of a pool, each written to picks.jsonl as it
finishes, a rerun skipping the tasks already decided.

    pool = load_pool(["trials.jsonl.gz"])
    jobs = jobs_of(pool, tasks=None, limit=20)
    report = select_many(jobs, verifier=v, settings=SelectionSettings(), picks=PicksFile(Path("picks.jsonl")))
    report.decided, report.failed, report.skipped

Tasks run ``at_once`` at a time on one event loop and one gateway (their model calls share the
endpoints' limits; the embedded model takes one call at a time, so one task at a time is its default).
Each decision is its own ``select`` run in the store, under one ``select-many`` run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from veriscale.data.pool import TaskGroup
from veriscale.engine import sync_edge
from veriscale.errors import UserError, setting
from veriscale.many.decisions import DecisionJob
from veriscale.many.executors import Executor, LocalExecutor
from veriscale.many.picks_file import PickRecord, PicksFile, PicksList
from veriscale.selection.settings import SelectionSettings

SHOWN = 5  # task ids an error names before it counts the rest


@dataclass
class ManyReport:
    """What one ``select-many`` run did: each task's record in finishing order, and the tasks skipped."""

    records: list[PickRecord] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # decided by an earlier run (their lines kept)
    notes: list[str] = field(default_factory=list)

    @property
    def decided(self) -> int:
        return sum(1 for r in self.records if r.error is None)

    @property
    def failed(self) -> int:
        return sum(1 for r in self.records if r.error is not None)

    def to_dict(self) -> dict[str, Any]:
        calls = sum(int(r.cost.get("model_calls", 0)) for r in self.records)
        hits = sum(int(r.cost.get("cache_hits", 0)) for r in self.records)
        return {"tasks": len(self.records) + len(self.skipped), "decided": self.decided, "failed": self.failed,
                "skipped": len(self.skipped), "model_calls": calls, "cache_hits": hits,
                "failures": [{"task": r.task, "error": r.error} for r in self.records if r.error is not None],
                "notes": list(self.notes)}


def jobs_of(pool: dict[str, TaskGroup], *, tasks: Sequence[str] | None = None,
            limit: int | None = None) -> list[DecisionJob]:
    """The decisions a pool asks for, in pool order: only ``tasks`` (ids) when given, then the first
    ``limit``. A run with no task is refused, naming where it came from."""
    if "" in pool:
        first = pool[""].candidates[0]
        where = f"'{first.source}'" if first.source else f"run '{first.id}'"
        raise UserError(f"{where} has no task (no task id or text): select-many groups runs by task, so give "
                        f"pools whose runs carry their task, or use select with {setting('task')} for one task")
    keys = list(pool)
    if tasks:
        unknown = [t for t in tasks if t not in pool]
        if unknown:
            named = ", ".join(repr(t) for t in unknown[:SHOWN])
            known = ", ".join(repr(k) for k in keys[:SHOWN]) + (f" and {len(keys) - SHOWN} more" if len(keys) > SHOWN else "")
            raise UserError(f"{setting('tasks')} names {named}, which the pool does not hold: the pool's tasks are "
                            f"{known}")
        keys = [k for k in keys if k in set(tasks)]
    if limit is not None:
        if limit < 1:
            raise UserError(f"{setting('limit', limit)} is below 1: give how many tasks to decide")
        keys = keys[:limit]
    jobs = []
    for key in keys:
        group = pool[key]
        assert group.task is not None  # keyed by its id or text
        jobs.append(DecisionJob(key, group.task, tuple(group.candidates)))
    return jobs


def default_at_once(model: Any, *, executor: str = "local", batch: bool = False, tasks: int = 1) -> int:
    """Tasks decided at once when none is given: every task with a batch API (one wave a batch), one
    on the embedded model here (it takes one call at a time), else four."""
    if batch:
        return max(1, tasks)
    return 1 if model.is_embedded and executor == "local" else 4


async def aselect_many(jobs: Sequence[DecisionJob], *, verifier: Any, settings: SelectionSettings,
                       picks: PicksFile | PicksList, at_once: int = 1, parent: int | None = None,
                       on_done: Callable[[PickRecord], None] | None = None,
                       on_call: Callable[[Any], None] | None = None,
                       executor: Executor | None = None) -> ManyReport:
    """Decide every job not already in ``picks`` (``at_once`` at a time), appending each record as it
    finishes; ``on_done(record)`` after each line is on disk."""
    if at_once < 1:
        raise UserError(f"{setting('tasks_at_once', at_once)} is below 1: give how many tasks may run at once")
    done = picks.resume()
    report = ManyReport(skipped=[j.key for j in jobs if j.key in done], notes=list(picks.notes))
    todo = [j for j in jobs if j.key not in done]
    slots = asyncio.Semaphore(at_once)
    runner = executor or LocalExecutor()

    async def one(job: DecisionJob) -> None:
        async with slots:
            record = await runner.decide(job, verifier=verifier, settings=settings, parent=parent, on_call=on_call)
        picks.append(record)  # the loop's one writer: a line is whole before the next one starts
        report.records.append(record)
        if on_done is not None:
            on_done(record)

    try:
        async with asyncio.TaskGroup() as group:  # an unexpected error stops the other tasks, not only itself
            for job in todo:
                group.create_task(one(job))
    except BaseExceptionGroup as stopped:  # the first error as itself (the others were cancellations)
        raise stopped.exceptions[0] from None
    return report


def select_many(jobs: Sequence[DecisionJob], **kwargs: Any) -> ManyReport:
    """:func:`aselect_many` from synchronous code (its own event loop)."""
    return sync_edge.run(aselect_many(jobs, **kwargs))
