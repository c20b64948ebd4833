"""Where ``select-many``'s decisions (and ``bench``'s items, ``track``'s trajectories) run: here on
the caller's loop (:class:`LocalExecutor`, the default) or on a Ray cluster (:class:`RayExecutor`,
``--executor ray [--address ADDR]``).

    executor = RayExecutor(address=None)      # a local Ray instance; "ray://host:10001" or "auto" for a cluster
    executor.start()                          # an unreachable address: one sentence, before any work
    report = select_many(jobs, ..., executor=executor)
    result = await executor.run_unit(unit, source=verifier, run_id=run.id)   # any unit (veriscale.many.units)

On Ray a worker runs a unit of work (:mod:`veriscale.many.units`: a decision, a bench item, a
trajectory's curve) on its own event loop and gateway over a private scratch store
(:mod:`veriscale.many.ray_worker`) and streams every finished call back; the driver commits each as
it arrives and links it to its own run (each decision's ``select`` run, the ``bench`` or ``track``
run), so the driver is the store's only writer and a killed worker loses nothing the driver
received. A unit whose worker died (or whose node went) is asked again, up to ``retries`` times,
seeded with every call already committed for it, so no committed call is asked twice.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from veriscale.engine.run_log import RunLog
from veriscale.engine.run_scope import recorded_run
from veriscale.errors import UserError, one_line, setting
from veriscale.many.decisions import DecisionJob, adecide, decision_unit, run_args
from veriscale.many.picks_file import PickRecord
from veriscale.many.units import Unit
from veriscale.selection.settings import SelectionSettings

EXECUTORS = ("local", "ray")


class Executor(Protocol):
    """Runs one task's decision as a ``select`` run under ``parent`` and gives its record."""

    async def decide(self, job: DecisionJob, *, verifier: Any, settings: SelectionSettings, parent: int | None,
                     on_call: Callable[[Any], None] | None) -> PickRecord: ...


class LocalExecutor:
    """The decision on the running loop and the verifier's own gateway."""

    async def decide(self, job: DecisionJob, *, verifier: Any, settings: SelectionSettings, parent: int | None,
                     on_call: Callable[[Any], None] | None) -> PickRecord:
        return await adecide(job, verifier=verifier, settings=settings, parent=parent, on_call=on_call)


def model_backends(model: Any) -> list[Any]:
    """The endpoint backends of the verifier's model (a worker loads each from its URI)."""
    from veriscale.engine.routing import EndpointPool

    return [e.backend for e in model.endpoints] if isinstance(model, EndpointPool) else [model]


def model_uris(model: Any) -> list[str]:
    """The endpoint URIs a worker loads the verifier's model from."""
    return [backend.uri for backend in model_backends(model)]


def probed_states(model: Any) -> list[dict[str, Any] | None]:
    """What the driver's backends learned by probing their servers, one per endpoint (None: nothing
    to hand over), so no worker probes an endpoint again."""
    from veriscale.models.abilities import ProbedState

    return [b.probed_state() if isinstance(b, ProbedState) else None for b in model_backends(model)]


def committed_calls(store: Any, keys: Iterable[str]) -> list[dict[str, Any]]:
    """The successful calls among ``keys`` in ``store`` (a unit's seeds), looked up by key."""
    from veriscale.many.call_feed import rows_of_keys

    return rows_of_keys(store, sorted(set(keys)), "AND status = 'ok'")


class RayExecutor:
    """Units of work as Ray tasks (module docstring). ``setup``: a picklable callable each worker runs
    first; ``runtime_env``: Ray's, for workers that need more than the driver's installation."""

    def __init__(self, address: str | None = None, *, retries: int = 2, setup: Callable[[], None] | None = None,
                 runtime_env: dict[str, Any] | None = None) -> None:
        self.address, self.retries, self.setup, self.runtime_env = address, retries, setup, runtime_env
        self._remote: Any = None
        self.desk: Any = None  # the cluster's endpoint limits (veriscale.many.ray_limits)
        self.attempts: dict[str, int] = {}  # unit key -> workers it took (1: no retry)
        self.committed: dict[str, set[str]] = {}  # unit key -> calls the driver committed or linked for it
        self._probed: list[dict[str, Any] | None] | None = None
        self._earlier: dict[str, list[int]] | None = None  # task -> this store's earlier select runs of it

    def start(self) -> None:
        """Join (or start) the Ray cluster; an address nobody answers is one sentence."""
        import ray

        from veriscale.many.ray_cluster import join

        join(self.address, drop=setting("executor", "ray"), runtime_env=self.runtime_env)
        from veriscale.many.ray_worker import run_here

        self._remote = ray.remote(num_returns="streaming", max_retries=0)(run_here)
        self.desk = _driver_desk()

    # -- decisions (select-many) ----------------------------------------------------------------
    async def decide(self, job: DecisionJob, *, verifier: Any, settings: SelectionSettings, parent: int | None,
                     on_call: Callable[[Any], None] | None) -> PickRecord:
        """One decision as a unit: each attempt is its own ``select`` run under ``parent`` (one whose
        worker was lost ends ``interrupted``), seeded with the calls earlier runs of the task committed."""
        unit = decision_unit(job, verifier, settings)
        try:
            return await self._decide(job, unit, verifier, settings, parent, on_call)
        finally:  # no other unit seeds from a decision: its keys would only grow the driver's memory
            self.committed.pop(unit.key, None)

    async def _decide(self, job: DecisionJob, unit: Unit, verifier: Any, settings: SelectionSettings,
                      parent: int | None, on_call: Callable[[Any], None] | None) -> PickRecord:
        store = verifier.executor.store
        earlier = await asyncio.to_thread(self._earlier_calls, store, job.key)
        lost = ""
        for attempt in range(1, self.retries + 2):
            with recorded_run(store, "select", verifier.model.uri, run_args(job, verifier, settings, parent),
                              parent=parent) as run:
                RunLog(store).record_candidates(run.id, job.candidates)
                try:
                    record, result = await self._attempt(unit, verifier, run.id, attempt, on_call, earlier)
                except _WorkerLost as gone:
                    lost = str(gone)
                    run.finish("interrupted", {"error": lost, "attempt": attempt})
                    continue
                record.run_id = run.id
                run.finish("ok" if record.error is None else "failed",
                           result if result is not None else {"error": record.error})
                return record  # type: ignore[no-any-return]
        return PickRecord(task=job.key, n_candidates=len(job.candidates), method=settings.method,
                          error=f"its worker was lost {self.retries + 1} times (last: {lost}): rerun to resume it")

    def _earlier_calls(self, store: Any, task: str) -> set[str]:
        """The calls linked to this store's earlier ``select`` runs of ``task`` (a rerun's seeds): the
        runs are read once per executor (by the runs' command index), the calls by their run's index."""
        if self._earlier is None:  # decisions start on several threads at once: each builds it whole
            rows, _ = store.execute("SELECT id, json_extract(args, '$.task') FROM runs WHERE command = 'select' "
                                    "ORDER BY command, id")
            found: dict[str, list[int]] = {}
            for run_id, key in rows:
                if key is not None:
                    found.setdefault(str(key), []).append(int(run_id))
            self._earlier = found
        runs = self._earlier.get(task, [])
        keys: set[str] = set()
        for i in range(0, len(runs), 500):
            chunk = runs[i:i + 500]
            found, _ = store.execute(f"SELECT call_key FROM run_calls WHERE run_id IN ({','.join('?' * len(chunk))})",
                                     tuple(chunk))
            keys.update(k for (k,) in found)
        return keys

    # -- any unit (bench items, track trajectories) ------------------------------------------
    async def run_unit(self, unit: Unit, *, source: Any, run_id: int | None,
                       on_call: Callable[[Any], None] | None = None) -> Any:
        """Run ``unit`` on a worker and give its result; its calls are committed to ``source``'s store
        (``source``: the driver's verifier or progress judge, whose model, gateway and store the unit
        shares) and linked to ``run_id``. A lost worker's unit is asked again, ``retries`` times."""
        lost = ""
        for attempt in range(1, self.retries + 2):
            try:
                return await self._attempt(unit, source, run_id, attempt, on_call, set())
            except _WorkerLost as gone:
                lost = str(gone)
        raise UserError(f"the worker of {unit.key} was lost {self.retries + 1} times (last: {lost}): rerun to "
                        "resume (the calls it made are in the store)")

    async def _attempt(self, unit: Unit, source: Any, run_id: int | None, attempt: int,
                       on_call: Callable[[Any], None] | None, earlier: set[str]) -> Any:
        from veriscale import settings as setting_source
        from veriscale.many.ray_worker import WorkerPayload

        if self._remote is None:
            self.start()
        store = source.executor.store
        gateway = source.executor.gateway
        if self._probed is None:  # probed once, by the driver, before the first unit leaves
            self._probed = await asyncio.to_thread(probed_states, source.model)
        self.attempts[unit.key] = attempt
        mine = self.committed.setdefault(unit.key, set())
        wanted = set(earlier) | mine | set(unit.seed_keys)
        for other in unit.seed_from:
            wanted |= self.committed.get(other, set())
        refresh = gateway.refresh and attempt == 1
        seeds = await asyncio.to_thread(committed_calls, store, () if refresh else wanted)
        payload = WorkerPayload(unit=unit, uris=model_uris(source.model), concurrency=gateway.concurrency,
                                chosen=setting_source.source.choices(), seeds=seeds, refresh=refresh,
                                setup=self.setup, desk=self.desk, holder=f"{uuid.uuid4().hex}:{unit.key}#{attempt}",
                                probed=self._probed, routing=gateway.pool.routing, **cluster_rates(gateway))
        return await self._stream(payload, store, run_id, on_call, mine)

    async def _stream(self, payload: Any, store: Any, run_id: int | None, on_call: Callable[[Any], None] | None,
                      mine: set[str]) -> Any:
        stream = self._remote.remote(payload)
        try:
            return await self._read(stream, payload.unit, store, run_id, on_call, mine)
        finally:  # whatever this attempt's worker still holds at the desk (it died holding slots)
            await self.desk.release_all.remote(payload.holder)

    async def _read(self, stream: Any, unit: Unit, store: Any, run_id: int | None,
                    on_call: Callable[[Any], None] | None, mine: set[str]) -> Any:
        import ray.exceptions

        from veriscale.many.ray_worker import arrived

        try:
            async for ref in stream:
                kind, data = await ref
                if kind == "calls":
                    await asyncio.wrap_future(store.submit(_commit, store, run_id, data))
                    mine.update(row["key"] for row in data["calls"] if row["status"] == "ok")
                    mine.update(link["key"] for link in data["links"])
                    if on_call is not None:  # once per model call the unit made (a row may arrive twice, as it changes)
                        for link in data["links"]:
                            if not link["cache_hit"]:
                                on_call(None)
                elif kind == "done":
                    return data
                elif kind == "raised":
                    if unit.retry_errors:
                        raise _WorkerLost(one_line(str(arrived(data)))[:300])
                    raise arrived(data)
                elif kind == "crash":
                    raise _WorkerLost(data)
        except ray.exceptions.RayError as exc:  # the worker died, its node went, it ran out of memory
            raise _WorkerLost(one_line(str(exc))[:300]) from None
        raise _WorkerLost("the worker's stream ended without a result")


#: this process's desk on each Ray session it joined: held here, so an executor that ends (a command's,
#: a test's) never drops the last reference and ends the desk under the next one
_DESKS: dict[tuple[str, str], Any] = {}


def _driver_desk() -> Any:
    import ray

    from veriscale.many.ray_limits import start_desk

    context = ray.get_runtime_context()
    session = (context.get_node_id(), context.get_job_id())
    if session not in _DESKS:
        _DESKS[session] = start_desk()
    return _DESKS[session]


def cluster_rates(gateway: Any) -> dict[str, int]:
    """The gateway's per-endpoint rpm and tpm (0: none), for the cluster's shared buckets."""
    limits = gateway.pool.endpoints[0].limits
    return {"rpm": limits.requests.per_minute if limits.requests else 0,
            "tpm": limits.tokens.per_minute if limits.tokens else 0}


class _WorkerLost(Exception):
    """A unit's worker stopped before it gave a result (the task is asked again)."""


def _commit(store: Any, run_id: int | None, data: dict[str, Any]) -> None:
    """On the store's writer thread: a worker's new calls and the driver's run's links to calls."""
    from veriscale.many.call_feed import put_rows

    put_rows(store, data["calls"])
    if run_id is None:
        return
    for link in data["links"]:
        store.link_call(run_id, link["key"], cache_hit=link["cache_hit"], label=link["label"])
