"""Where ``select-many``'s decisions run: here on the caller's loop (:class:`LocalExecutor`, the
default) or on a Ray cluster (:class:`RayExecutor`, ``--executor ray [--address ADDR]``).

    executor = RayExecutor(address=None)      # a local Ray instance; "ray://host:10001" or "auto" for a cluster
    executor.start()                          # an unreachable address: one sentence, before any work
    report = select_many(jobs, ..., executor=executor)

Either way each decision is a ``select`` run in the driver's store. On Ray a worker runs the
selection on its own event loop and gateway over a private scratch store
(:mod:`veriscale.many.ray_worker`) and streams every finished call back; the driver commits each as
it arrives and links it to the decision's run, so the driver is the store's only writer and a killed
worker loses nothing the driver received. A task whose worker died (or whose node went) is asked
again, up to ``retries`` times, seeded with every call already committed for it, so no committed
call is asked twice.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from veriscale.engine.run_log import RunLog
from veriscale.engine.run_scope import recorded_run
from veriscale.errors import UserError, one_line, setting
from veriscale.many.decisions import DecisionJob, adecide, run_args
from veriscale.many.picks_file import PickRecord
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
    endpoints = getattr(model, "endpoints", None)
    return [e.backend for e in endpoints] if endpoints else [model]


def model_uris(model: Any) -> list[str]:
    """The endpoint URIs a worker loads the verifier's model from."""
    return [backend.uri for backend in model_backends(model)]


def probed_states(model: Any) -> list[dict[str, Any] | None]:
    """What the driver's backends learned by probing their servers, one per endpoint (None: nothing
    to hand over), so no worker probes an endpoint again."""
    from veriscale.models.abilities import ProbedState

    return [b.probed_state() if isinstance(b, ProbedState) else None for b in model_backends(model)]


def committed_calls(store: Any, task: str) -> list[dict[str, Any]]:
    """Every successful call the store links to an earlier ``select`` run of ``task`` (a retry's seeds)."""
    from veriscale.many.ray_worker import call_rows

    return call_rows(store, "WHERE status = 'ok' AND key IN (SELECT rc.call_key FROM run_calls rc JOIN runs r ON "
                            "r.id = rc.run_id WHERE r.command = 'select' AND json_extract(r.args, '$.task') = ?)",
                     (task,))


class RayExecutor:
    """Decisions as Ray tasks (module docstring). ``setup``: a picklable callable each worker runs
    first; ``runtime_env``: Ray's, for workers that need more than the driver's installation."""

    def __init__(self, address: str | None = None, *, retries: int = 2, setup: Callable[[], None] | None = None,
                 runtime_env: dict[str, Any] | None = None) -> None:
        self.address, self.retries, self.setup, self.runtime_env = address, retries, setup, runtime_env
        self._remote: Any = None
        self.desk: Any = None  # the cluster's endpoint limits (veriscale.many.ray_limits)
        self.attempts: dict[str, int] = {}  # task -> workers it took (1: no retry)
        self._probed: list[dict[str, Any] | None] | None = None

    def start(self) -> None:
        """Join (or start) the Ray cluster; an address nobody answers is one sentence."""
        try:
            import ray
        except ImportError:
            raise UserError(f"{setting('executor', 'ray')} needs Ray: pip install 'veriscale[ray]'") from None
        if not ray.is_initialized():
            _reachable(self.address)
            try:
                ray.init(address=self.address, include_dashboard=False, log_to_driver=False,
                         runtime_env=self.runtime_env, configure_logging=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                where = self.address or "a local instance"
                raise UserError(f"cannot reach the Ray cluster at {where} ({one_line(str(exc))[:200]}): start it with "
                                f"'ray start' on its head node, give its address with {setting('address')}, or drop "
                                f"{setting('executor', 'ray')}") from None
        from veriscale.many.ray_limits import start_desk
        from veriscale.many.ray_worker import decide_here

        self._remote = ray.remote(num_returns="streaming", max_retries=0)(decide_here)
        self.desk = start_desk()

    async def decide(self, job: DecisionJob, *, verifier: Any, settings: SelectionSettings, parent: int | None,
                     on_call: Callable[[Any], None] | None) -> PickRecord:
        from veriscale import settings as setting_source
        from veriscale.many.ray_worker import WorkerPayload

        if self._remote is None:
            self.start()
        store = verifier.executor.store
        if self._probed is None:  # probed once, by the driver, before the first task leaves
            self._probed = await asyncio.to_thread(probed_states, verifier.model)
        lost = ""
        for attempt in range(1, self.retries + 2):
            self.attempts[job.key] = attempt
            with recorded_run(store, "select", verifier.model.uri, run_args(job, verifier, settings, parent),
                              parent=parent) as run:
                RunLog(store).record_candidates(run.id, job.candidates)
                payload = WorkerPayload(job=job, settings=settings, uris=model_uris(verifier.model),
                                        concurrency=verifier.executor.gateway.concurrency,
                                        chosen=setting_source.source.choices(),
                                        seeds=await asyncio.to_thread(committed_calls, store, job.key),
                                        refresh=verifier.executor.gateway.refresh and attempt == 1, setup=self.setup,
                                        desk=self.desk, holder=f"{uuid.uuid4().hex}:{job.key}#{attempt}",
                                        probed=self._probed,
                                        **_rates(verifier))
                try:
                    record, result = await self._stream(payload, store, run.id, on_call)
                except _WorkerLost as gone:
                    lost = str(gone)
                    run.finish("interrupted", {"error": lost, "attempt": attempt})
                    continue
                record.run_id = run.id
                run.finish("ok" if record.error is None else "failed",
                           result if result is not None else {"error": record.error})
                return record
        return PickRecord(task=job.key, n_candidates=len(job.candidates), method=settings.method,
                          error=f"its worker was lost {self.retries + 1} times (last: {lost}): rerun to resume it")

    async def _stream(self, payload: Any, store: Any, run_id: int,
                      on_call: Callable[[Any], None] | None) -> tuple[PickRecord, dict[str, Any] | None]:
        stream = self._remote.remote(payload)
        try:
            return await self._read(stream, store, run_id, on_call)
        finally:  # whatever this attempt's worker still holds at the desk (it died holding slots)
            await self.desk.release_all.remote(payload.holder)

    async def _read(self, stream: Any, store: Any, run_id: int,
                    on_call: Callable[[Any], None] | None) -> tuple[PickRecord, dict[str, Any] | None]:
        import ray.exceptions

        try:
            async for ref in stream:
                kind, data = await ref
                if kind == "calls":
                    await asyncio.wrap_future(store.submit(_commit, store, run_id, data))
                    if on_call is not None:
                        for _ in data["calls"]:
                            on_call(None)
                elif kind == "done":
                    return data["record"], data["result"]
                elif kind == "crash":
                    raise _WorkerLost(data)
        except ray.exceptions.RayError as exc:  # the worker died, its node went, it ran out of memory
            raise _WorkerLost(one_line(str(exc))[:300]) from None
        raise _WorkerLost("the worker's stream ended without a result")


def _rates(verifier: Any) -> dict[str, int]:
    """The verifier's per-endpoint rpm and tpm (0: none), for the cluster's shared buckets."""
    limits = verifier.executor.gateway.pool.endpoints[0].limits
    return {"rpm": limits.requests.per_minute if limits.requests else 0,
            "tpm": limits.tokens.per_minute if limits.tokens else 0}


def _reachable(address: str | None, timeout_s: float = 5.0) -> None:
    """Refuse, in one sentence and before any work, an address no process listens on (Ray itself
    would retry for a minute). None and "auto" mean a local instance: nothing to reach."""
    import socket

    if address in (None, "", "auto", "local"):
        return
    where = address.split("://", 1)[-1]
    host, _, port = where.rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"{setting('address', repr(address))} is not HOST:PORT (or ray://HOST:PORT): give the head "
                        "node's address, e.g. 10.0.0.5:6379")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise UserError(f"nothing answers at {setting('address', address)} ({exc.strerror or exc}): start the cluster "
                        f"with 'ray start' on its head node, check the address, or drop {setting('executor', 'ray')}") from None


class _WorkerLost(Exception):
    """A decision's worker stopped before it gave a result (the task is asked again)."""


def _commit(store: Any, run_id: int, data: dict[str, Any]) -> None:
    """On the store's writer thread: a worker's new calls and the decision run's links to calls."""
    from veriscale.many.ray_worker import put_rows

    put_rows(store, data["calls"])
    for link in data["links"]:
        store.link_call(run_id, link["key"], cache_hit=link["cache_hit"], label=link["label"])
