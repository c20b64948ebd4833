"""What a Ray worker runs for one unit of work of ``--executor ray`` (a ``select-many`` decision, a
``bench`` item, a ``track`` trajectory): the unit's work function on the worker's own event loop and
gateway, over a private scratch store, every finished call streamed back to the driver (which alone
writes the user's store) as it lands.

    for kind, data in run_here(payload):          # a Ray streaming generator's body
        ("calls", {"calls": [...], "links": [...]})  # new or changed call rows and the run's links to calls
        ("done", result)                             # what the unit's work function returned
        ("raised", (type, text, attributes))         # the work function raised (the driver raises it again)

The scratch store starts with the calls the driver already committed for this unit (``seeds``), so a
unit retried after its worker died takes them from there instead of asking the model again.
"""

from __future__ import annotations

import asyncio
import pickle
import queue
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veriscale.many.call_feed import CallFeed, put_rows
from veriscale.many.units import Unit

@dataclass
class WorkerPayload:
    """Everything a worker needs for one attempt at one unit (pickled to it by Ray)."""

    unit: Unit
    uris: list[str]
    concurrency: int
    chosen: dict[str, Any] = field(default_factory=dict)  # the command's settings library code reads
    seeds: list[dict[str, Any]] = field(default_factory=list)  # calls the driver committed for this unit
    refresh: bool = False
    setup: Callable[[], None] | None = None  # run first on the worker (a test registers its double here)
    desk: Any = None  # the cluster's endpoint limits (veriscale.many.ray_limits); None: this worker's own
    holder: str = ""  # who this attempt's slots belong to at the desk
    rpm: int = 0
    tpm: int = 0
    probed: list[dict[str, Any] | None] | None = None  # what the driver's probes found, one per endpoint
    routing: str = "affinity"  # the driver's pool's routing (affinity: decided at the desk, cluster-wide)


def run_here(payload: WorkerPayload) -> Iterator[tuple[str, Any]]:
    """Run ``payload``'s unit here, yielding what the driver commits (module docstring). A finished
    call only pokes this generator; it reads the feed once for every poke queued since its last read
    (the calls that finished while it sent the last item go in one item, one store read)."""
    out: queue.Queue[tuple[str, Any]] = queue.Queue()
    scratch = Path(tempfile.mkdtemp(prefix="veriscale-worker-"))
    stores: list[Any] = []  # the scratch store, closed here once the last item has gone (this side reads it too)

    def work() -> None:
        try:
            asyncio.run(_run(payload, out, scratch, stores))
        except BaseException as exc:  # noqa: BLE001 - reported to the driver, which retries or fails the unit
            out.put(("crash", f"{type(exc).__name__}: {exc}"))

    threading.Thread(target=work, name="veriscale-unit", daemon=True).start()
    try:
        yield from _items(out)
    finally:
        for store in stores:
            store.close()
        shutil.rmtree(scratch, ignore_errors=True)


def _items(out: queue.Queue[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
    pending: tuple[str, Any] | None = None
    while True:
        kind, data = pending if pending is not None else out.get()
        pending = None
        if kind == "poke":
            feed = data
            while True:  # every poke queued already: one read covers them
                try:
                    following = out.get_nowait()
                except queue.Empty:
                    break
                if following[0] != "poke":
                    pending = following
                    break
            data = feed.new()
            if data["calls"] or data["links"]:
                yield "calls", data
            continue
        yield kind, data
        if kind in ("done", "crash", "raised"):
            return


def _cpus_here() -> int:
    """The CPUs Ray assigned to this task (1 outside a Ray task): the embedded model's threads, so
    tasks on one node never oversubscribe it."""
    try:
        import ray

        return max(1, int(ray.get_runtime_context().get_assigned_resources().get("CPU", 1)))
    except Exception:  # noqa: BLE001 - not in a Ray task
        return 1


def travelling(exc: BaseException) -> tuple[type[BaseException], tuple[Any, ...], dict[str, Any]]:
    """An exception as it travels to the driver: its class, args and attributes (an exception with
    keyword-only arguments does not survive pickling as itself)."""
    state = (type(exc), tuple(exc.args), dict(getattr(exc, "__dict__", {})))
    try:
        pickle.loads(pickle.dumps(state))
    except Exception:  # noqa: BLE001 - a class or attribute that does not travel: its words do
        return RuntimeError, (f"{type(exc).__name__}: {exc}",), {}
    return state


def arrived(state: tuple[type[BaseException], tuple[Any, ...], dict[str, Any]]) -> BaseException:
    """The exception :func:`travelling` sent, rebuilt on the driver."""
    cls, args, attributes = state
    exc = cls.__new__(cls)
    BaseException.__init__(exc, *args)
    exc.__dict__.update(attributes)
    return exc


async def _run(payload: WorkerPayload, out: queue.Queue[tuple[str, Any]], scratch: Path, stores: list[Any]) -> None:
    from veriscale import settings as setting_source
    from veriscale.engine.routing import EndpointPool
    from veriscale.engine.run_scope import recorded_run
    from veriscale.engine.store import Store
    from veriscale.many.ray_limits import worker_backends

    if payload.setup is not None:
        payload.setup()
    setting_source.choose({"threads": _cpus_here(), **payload.chosen})  # the embedded model: this task's CPUs
    store = Store.open(scratch / "calls.sqlite3")
    stores.append(store)
    put_rows(store, payload.seeds)
    backends = worker_backends(payload.uris, payload.probed, payload.desk, holder=payload.holder,
                               concurrency=payload.concurrency, rpm=payload.rpm, tpm=payload.tpm)
    model: Any = backends[0]
    if len(backends) > 1:
        router = None
        if payload.desk is not None and payload.routing == "affinity":
            from veriscale.many.ray_limits import remote_router

            router = remote_router(backends, payload.desk)  # one prefix, one endpoint, from any worker
        model = EndpointPool(backends, concurrency=payload.concurrency, routing=payload.routing, router=router)
    unit = payload.unit
    judge = unit.judge(model, store, payload.refresh, payload.concurrency, unit.max_calls)
    with recorded_run(store, unit.command, model.uri, unit.args) as run:
        feed = CallFeed(store, run.id)
        try:
            result = await unit.work(judge, unit.spec, lambda _outcome: out.put(("poke", feed)))
        except Exception as exc:  # noqa: BLE001 - the unit's own error: the driver raises it (or retries)
            out.put(("calls", feed.new()))
            out.put(("raised", travelling(exc)))
            return
        run.finish("ok", {})
    out.put(("calls", feed.new()))
    out.put(("done", result))
