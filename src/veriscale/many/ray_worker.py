"""What a Ray worker runs for one decision of ``select-many --executor ray``: the selection on the
worker's own event loop and gateway, over a private scratch store, every finished call streamed
back to the driver (which alone writes the user's store) as it lands.

    for kind, data in decide_here(payload):       # a Ray streaming generator's body
        ("calls", {"calls": [...], "links": [...]})  # new call rows and the run's links to calls
        ("done", {"record": PickRecord, "result": {...} | None})

The scratch store starts with the calls the driver already committed for this task (``seeds``), so
a task retried after its worker died takes them from there instead of asking the model again.
"""

from __future__ import annotations

import asyncio
import json
import queue
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veriscale.many.decisions import DecisionJob
from veriscale.selection.settings import SelectionSettings

#: the columns of a call row that travel between the worker's scratch store and the driver's
CALL_COLUMNS = ("key", "model", "fingerprint", "prompt_version", "request", "status", "response", "error",
                "latency_s", "kind", "prompt_tokens", "cached_tokens", "completion_tokens", "processed_tokens")


@dataclass
class WorkerPayload:
    """Everything a worker needs for one decision (pickled to it by Ray)."""

    job: DecisionJob
    settings: SelectionSettings
    uris: list[str]
    concurrency: int
    chosen: dict[str, Any] = field(default_factory=dict)  # the command's settings library code reads
    seeds: list[dict[str, Any]] = field(default_factory=list)  # calls the driver committed for this task
    refresh: bool = False
    setup: Callable[[], None] | None = None  # run first on the worker (a test registers its double here)
    desk: Any = None  # the cluster's endpoint limits (veriscale.many.ray_limits); None: this worker's own
    holder: str = ""  # who this attempt's slots belong to at the desk
    rpm: int = 0
    tpm: int = 0
    probed: list[dict[str, Any] | None] | None = None  # what the driver's probes found, one per endpoint


def call_rows(store: Any, where: str = "", params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    """Call rows of ``store`` as dicts (request and response decoded)."""
    rows, _ = store.execute(f"SELECT {', '.join(CALL_COLUMNS)} FROM calls {where}", params)
    out = []
    for row in rows:
        data = dict(zip(CALL_COLUMNS, row))
        data["request"] = json.loads(data["request"]) if data["request"] else {}
        data["response"] = json.loads(data["response"]) if data["response"] else None
        out.append(data)
    return out


def put_rows(store: Any, rows: list[dict[str, Any]]) -> None:
    """Commit call rows (from :func:`call_rows`) into ``store``."""
    for row in rows:
        rest = {k: v for k, v in row.items() if k != "key"}
        store.put_call(row["key"], **rest)


class _Feed:
    """What of the scratch store the driver has not been sent yet."""

    def __init__(self, store: Any, run_id: int) -> None:
        self.store, self.run_id = store, run_id
        self.sent: dict[str, tuple[Any, ...]] = {}
        self.last_link = 0
        for row in call_rows(store):  # the seeds: the driver has them
            self.sent[row["key"]] = (row["status"], row["response"] is not None)

    def new(self) -> dict[str, Any]:
        self.store.flush()
        calls = []
        for row in call_rows(self.store):
            state = (row["status"], row["response"] is not None)
            if self.sent.get(row["key"]) != state:
                self.sent[row["key"]] = state
                calls.append(row)
        links, _ = self.store.execute("SELECT rowid, call_key, cache_hit, label FROM run_calls WHERE run_id = ? "
                                      "AND rowid > ? ORDER BY rowid", (self.run_id, self.last_link))
        if links:
            self.last_link = links[-1][0]
        return {"calls": calls, "links": [{"key": k, "cache_hit": bool(h), "label": lab} for _, k, h, lab in links]}


def decide_here(payload: WorkerPayload) -> Iterator[tuple[str, Any]]:
    """Run ``payload``'s decision here, yielding what the driver commits (module docstring)."""
    out: queue.Queue[tuple[str, Any]] = queue.Queue()

    def work() -> None:
        try:
            asyncio.run(_decide(payload, out))
        except BaseException as exc:  # noqa: BLE001 - reported to the driver, which retries or fails the task
            out.put(("crash", f"{type(exc).__name__}: {exc}"))

    threading.Thread(target=work, name="veriscale-decision", daemon=True).start()
    while True:
        kind, data = out.get()
        yield kind, data
        if kind in ("done", "crash"):
            return


def _cpus_here() -> int:
    """The CPUs Ray assigned to this task (1 outside a Ray task): the embedded model's threads, so
    tasks on one node never oversubscribe it."""
    try:
        import ray

        return max(1, int(ray.get_runtime_context().get_assigned_resources().get("CPU", 1)))
    except Exception:  # noqa: BLE001 - not in a Ray task
        return 1


async def _decide(payload: WorkerPayload, out: queue.Queue[tuple[str, Any]]) -> None:
    from veriscale import settings as setting_source
    from veriscale.engine.routing import EndpointPool
    from veriscale.engine.run_scope import recorded_run
    from veriscale.engine.store import Store
    from veriscale.many.decisions import apick, run_args
    from veriscale.models.abilities import ProbedState
    from veriscale.models.uri import load_backend

    if payload.setup is not None:
        payload.setup()
    setting_source.choose({"threads": _cpus_here(), **payload.chosen})  # the embedded model: this task's CPUs
    scratch = Path(tempfile.mkdtemp(prefix="veriscale-worker-"))
    store = Store.open(scratch / "calls.sqlite3")
    try:
        put_rows(store, payload.seeds)
        backends = [load_backend(uri) for uri in payload.uris]
        for backend, state in zip(backends, payload.probed or []):
            if state is not None and isinstance(backend, ProbedState):
                backend.adopt_probed_state(state)  # the driver probed this endpoint: no probe from here
        if payload.desk is not None:
            from veriscale.many.ray_limits import install_remote_limits

            for backend in backends:
                install_remote_limits(backend, payload.desk, holder=payload.holder, concurrency=payload.concurrency,
                                      rpm=payload.rpm, tpm=payload.tpm)
        model: Any = backends[0] if len(backends) == 1 else EndpointPool(backends, concurrency=payload.concurrency)
        verifier = payload.settings.verifier(model, store=store, refresh=payload.refresh,
                                             concurrency=payload.concurrency)
        job = payload.job
        with recorded_run(store, "select", verifier.model.uri, run_args(job, verifier, payload.settings, None)) as run:
            feed = _Feed(store, run.id)
            record, result = await apick(job, verifier=verifier, settings=payload.settings,
                                         on_call=lambda _outcome: out.put(("calls", feed.new())))
            run.finish("ok" if record.error is None else "failed", {})
        out.put(("calls", feed.new()))
        out.put(("done", {"record": record, "result": result}))
    finally:
        store.close()
        shutil.rmtree(scratch, ignore_errors=True)
