"""A unit of work for an executor: what one Ray task runs (a ``select-many`` decision, one ``bench``
item, one ``track`` trajectory), described so it travels to a worker.

    unit = Unit(key="bench:0:3", work=pair_work, spec=(pair, texts), judge=verifier_recipe(settings),
                command="bench", args={"item": 3})
    results = await run_units(executor, units, source=verifier, run_id=run.id, at_once=4)

``work`` is a top-level async function ``work(judge, spec, on_call) -> result`` (``on_call(outcome)``
after every finished model call, for the driver's live commits); ``judge`` a top-level callable
``judge(model, store, refresh, concurrency, max_calls)`` that builds, on the worker, the verifier or
progress judge ``work`` gets, from the worker's model and scratch store. Spec, recipe and result are
pickled. A cap on new calls over all units (``--max-calls``) runs them one at a time, each with what
the ones before it left.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

OnCall = Callable[[Any], None]
Work = Callable[[Any, Any, OnCall], Awaitable[Any]]
Recipe = Callable[[Any, Any, bool, int, "int | None"], Any]


@dataclass(frozen=True)
class Unit:
    """One unit of work (module docstring). ``key``: unique within the driver's run (attempts, seeds
    and the desk's holder ids are named by it); ``command``/``args``: the worker's scratch run.

    ``retry_errors``: an error ``work`` raises is retried like a lost worker (a decision reports its
    own failures in its result, so anything else is the worker's); otherwise it is raised on the
    driver as the local executor would raise it. ``seed_keys``: calls the unit is planned to make,
    sent along as seeds when the driver's store holds them already (a rerun); ``seed_from``: other
    units whose committed calls it reuses (a bench's discrete twin of a continuous configuration).
    """

    key: str
    work: Work
    spec: Any
    judge: Recipe
    command: str = "unit"
    args: dict[str, Any] = field(default_factory=dict)
    retry_errors: bool = False
    seed_keys: tuple[str, ...] = ()
    seed_from: tuple[str, ...] = ()
    max_calls: int | None = None  # new model calls the unit may make (None: no cap)


def _settings_verifier(settings: Any, model: Any, store: Any, refresh: bool, concurrency: int,
                       max_calls: int | None) -> Any:
    return settings.verifier(model, store=store, refresh=refresh, max_calls=max_calls, concurrency=concurrency)


def verifier_recipe(settings: Any) -> Recipe:
    """The recipe of ``settings.verifier(model, ...)`` on a worker (``settings``: a ``SelectionSettings``)."""
    return functools.partial(_settings_verifier, settings)


def chain_shared(units: Sequence[Unit]) -> list[Unit]:
    """``units`` with each one seeded from the earlier ones that plan a call it plans too (the same
    prompt in two trajectories, two pairs): run as the local executor runs them, the earlier one asks
    and the later one finds the answer (a cache hit), instead of both asking at once."""
    chained: list[Unit] = []
    owner: dict[str, str] = {}  # call key -> the first unit that plans it
    for unit in units:
        earlier = tuple(dict.fromkeys(owner[k] for k in unit.seed_keys if k in owner))
        chained.append(replace(unit, seed_from=tuple(dict.fromkeys((*unit.seed_from, *earlier)))) if earlier else unit)
        for key in unit.seed_keys:
            owner.setdefault(key, unit.key)
    return chained


async def run_units(executor: Any, units: Sequence[Unit], *, source: Any, run_id: int | None, at_once: int = 1,
                    on_call: OnCall | None = None, on_done: Callable[[int, Any], None] | None = None,
                    max_calls: int | None = None, calls_of: Callable[[Any], int] | None = None) -> list[Any]:
    """Every unit on ``executor`` (a :class:`~veriscale.many.executors.RayExecutor`), ``at_once`` at a
    time, their calls committed to ``source``'s store and linked to ``run_id``; the results in the
    order of ``units``. ``on_done(index, result)`` as each finishes. A unit seeded from another of
    ``units`` (``seed_from``) waits until that one has finished. ``max_calls``: new model calls all
    units together may make (one unit at a time then; ``calls_of(result)``: what one made)."""
    if max_calls is not None:
        at_once = 1
    slots = asyncio.Semaphore(max(1, at_once))
    results: list[Any] = [None] * len(units)
    finished = {unit.key: asyncio.Event() for unit in units}
    spent = 0

    async def one(index: int, unit: Unit) -> None:
        try:
            await attempt(index, unit)
        finally:
            finished[unit.key].set()

    async def attempt(index: int, unit: Unit) -> None:
        nonlocal spent
        for other in unit.seed_from:
            if other in finished:
                await finished[other].wait()
        async with slots:
            if max_calls is not None:
                unit = replace(unit, max_calls=max(max_calls - spent, 0))
            results[index] = await executor.run_unit(unit, source=source, run_id=run_id, on_call=on_call)
            if max_calls is not None and calls_of is not None:
                spent += calls_of(results[index])
        if on_done is not None:
            on_done(index, results[index])

    try:
        async with asyncio.TaskGroup() as group:
            for index, unit in enumerate(units):
                group.create_task(one(index, unit))
    except BaseExceptionGroup as stopped:  # the first error as itself (the others were cancellations)
        raise stopped.exceptions[0] from None
    return results
