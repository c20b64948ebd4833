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
import json
import pickle
import queue
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veriscale.many.units import Unit

#: the columns of a call row that travel between the worker's scratch store and the driver's
CALL_COLUMNS = ("key", "model", "fingerprint", "prompt_version", "request", "status", "response", "error",
                "latency_s", "kind", "prompt_tokens", "cached_tokens", "completion_tokens", "processed_tokens")


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


def _decoded(row: tuple[Any, ...]) -> dict[str, Any]:
    data = dict(zip(CALL_COLUMNS, row))
    data["request"] = json.loads(data["request"]) if data["request"] else {}
    data["response"] = json.loads(data["response"]) if data["response"] else None
    return data


def call_rows(store: Any, where: str = "", params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    """Call rows of ``store`` as dicts (request and response decoded)."""
    rows, _ = store.execute(f"SELECT {', '.join(CALL_COLUMNS)} FROM calls {where}", params)
    return [_decoded(row) for row in rows]


def rows_of_keys(store: Any, keys: list[str], where: str = "") -> list[dict[str, Any]]:
    """The call rows of ``keys`` (looked up by the calls table's primary key, 500 at a time), in the
    order of ``keys``; ``where``: a further condition (``"AND status = 'ok'"``)."""
    unique = list(dict.fromkeys(keys))
    found: dict[str, dict[str, Any]] = {}
    for i in range(0, len(unique), 500):
        chunk = unique[i:i + 500]
        for row in call_rows(store, f"WHERE key IN ({','.join('?' * len(chunk))}) {where}", tuple(chunk)):
            found[row["key"]] = row
    return [found[k] for k in unique if k in found]


def put_rows(store: Any, rows: list[dict[str, Any]]) -> None:
    """Commit call rows (from :func:`call_rows`) into ``store``."""
    for row in rows:
        rest = {k: v for k, v in row.items() if k != "key"}
        store.put_call(row["key"], **rest)


#: the scratch store's change log: every insert or update of a call row appends its key, so the feed
#: reads only what changed since its last read (an upsert keeps a row's rowid, so a rowid watermark
#: over ``calls`` alone would miss a row updated in place)
_FEED_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS feed_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, call_key TEXT NOT NULL)",
    "CREATE TRIGGER IF NOT EXISTS feed_insert AFTER INSERT ON calls BEGIN "
    "INSERT INTO feed_log (call_key) VALUES (NEW.key); END",
    "CREATE TRIGGER IF NOT EXISTS feed_update AFTER UPDATE ON calls BEGIN "
    "INSERT INTO feed_log (call_key) VALUES (NEW.key); END",
)


class _Feed:
    """What of the scratch store the driver has not been sent yet: the call rows written or changed
    since the last :meth:`new` (a watermark over the store's change log) and the run's new links."""

    def __init__(self, store: Any, run_id: int) -> None:
        self.store, self.run_id = store, run_id
        self.lock = threading.Lock()  # a unit's calls may finish on threads of its own
        for sql in _FEED_SCHEMA:
            store.execute(sql)
        rows, _ = store.execute("SELECT COALESCE(MAX(seq), 0) FROM feed_log")
        self.last_seq = int(rows[0][0])  # what is in the store already (the seeds): the driver has it
        self.last_link = 0
        self.rows_read = 0  # call rows read so far (each change once)

    def new(self) -> dict[str, Any]:
        """The changes since the last call. The links are read first: a call's row is written before
        its link, so the rows read after them hold every linked call's outcome (read the other way,
        a call finishing between the two reads would arrive linked with its row still in flight)."""
        with self.lock:
            self.store.flush()
            links, _ = self.store.execute("SELECT rowid, call_key, cache_hit, label FROM run_calls WHERE run_id = ? "
                                          "AND rowid > ? ORDER BY rowid", (self.run_id, self.last_link))
            if links:
                self.last_link = links[-1][0]
            changed, _ = self.store.execute("SELECT seq, call_key FROM feed_log WHERE seq > ? ORDER BY seq",
                                            (self.last_seq,))
            calls: list[dict[str, Any]] = []
            if changed:
                self.last_seq = changed[-1][0]
                calls = rows_of_keys(self.store, [key for _, key in changed])
                self.rows_read += len(calls)
            return {"calls": calls,
                    "links": [{"key": k, "cache_hit": bool(h), "label": lab} for _, k, h, lab in links]}


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
        feed = _Feed(store, run.id)
        try:
            result = await unit.work(judge, unit.spec, lambda _outcome: out.put(("poke", feed)))
        except Exception as exc:  # noqa: BLE001 - the unit's own error: the driver raises it (or retries)
            out.put(("calls", feed.new()))
            out.put(("raised", travelling(exc)))
            return
        run.finish("ok", {})
    out.put(("calls", feed.new()))
    out.put(("done", result))
