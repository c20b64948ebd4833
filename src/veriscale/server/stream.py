"""Server-sent events for one run: its run events as they land in the store, from any process.

    GET /api/runs/12/stream?after=40        (or the browser's Last-Event-ID on reconnect)

    id: 41
    event: point
    data: {"trajectory": "t1", "point": {"step": 7, "value": 0.42, ...}}

The stream polls the store (``POLL_S``), so a ``track --follow`` in another terminal shows up
as it scores; it ends with an ``end`` event once the run is no longer running (or is found dead:
its process stopped without ending it, see :mod:`veriscale.engine.run_liveness`) and every event
was sent, and sends a comment line every ``KEEPALIVE_S`` so proxies keep it open.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, AsyncIterator, Callable

from veriscale.engine.run_liveness import settle_dead_runs
from veriscale.engine.run_log import RunLog
from veriscale.engine.store import RunRecord, Store

POLL_S = 0.2
KEEPALIVE_S = 15.0


def sse(data: Any, event: str | None = None, event_id: int | None = None) -> str:
    """One server-sent event (``data`` as JSON, or a ready string such as ``[DONE]``); the run
    stream and the proxies' streams both use it."""
    head = (f"id: {event_id}\n" if event_id is not None else "") + (f"event: {event}\n" if event else "")
    body = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str)
    return f"{head}data: {body}\n\n"


def _settled_run(store: Store, run_id: int) -> RunRecord | None:
    """The run, rewritten as interrupted first if its process died without ending it."""
    settle_dead_runs(store, [run_id])
    return store.run(run_id)


async def run_stream(store: Store, run_id: int, after: int = 0, *, poll_s: float = POLL_S,
                     is_disconnected=None, redact: Callable[[Any], Any] = lambda doc: doc) -> AsyncIterator[str]:
    """The run's events as SSE lines, each event's data through ``redact`` (the app's redactor)."""
    log = RunLog(store)
    quiet_since = time.monotonic()
    yield "retry: 1000\n\n"
    while True:
        events = await asyncio.to_thread(log.since, run_id, after, 500)
        for event in events:
            after = event.id
            yield sse(redact({**event.data, "at": event.at}), event.kind, event.id)
        if events:
            quiet_since = time.monotonic()
            continue
        run = await asyncio.to_thread(_settled_run, store, run_id)
        if run is None or run.status != "running":
            for event in await asyncio.to_thread(log.since, run_id, after, 100_000):  # written just before it ended
                yield sse(redact({**event.data, "at": event.at}), event.kind, event.id)
            yield sse({"status": None if run is None else run.status}, "end")
            return
        if is_disconnected is not None and await is_disconnected():
            return
        if time.monotonic() - quiet_since > KEEPALIVE_S:
            quiet_since = time.monotonic()
            yield ": keepalive\n\n"
        await asyncio.sleep(poll_s)
