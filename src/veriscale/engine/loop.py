"""The one event loop the synchronous facade runs the gateway on (a daemon thread per process).

    outcomes = run_sync(gateway.run(calls))       # from ordinary synchronous code

Async callers (the server, proxies, RL reward functions) await the gateway directly on their own
loop instead; calling :func:`run_sync` from inside a running loop is refused.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def background_loop() -> asyncio.AbstractEventLoop:
    """The process's gateway loop, started on first use."""
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="veriscale-gateway", daemon=True)
            thread.start()
            atexit.register(_stop, loop, thread)
            _loop = loop
        return _loop


def _stop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    """At exit: finish the loop and its worker threads while every module is still intact."""
    if loop.is_closed():
        return

    async def drain() -> None:
        await loop.shutdown_default_executor()

    try:
        asyncio.run_coroutine_threadsafe(drain(), loop).result(timeout=10)
    except Exception:  # noqa: BLE001 - best effort at interpreter exit
        pass
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=10)
    loop.close()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the gateway loop and wait for its result (exceptions propagate)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        coro.close()
        raise RuntimeError("the synchronous gateway facade was called from inside an event loop: await the Gateway instead")
    return asyncio.run_coroutine_threadsafe(coro, background_loop()).result()


async def on_gateway_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` from any event loop while it runs on the gateway loop.

    A gateway's locks and limits belong to the loop it runs on, so async callers that share a
    gateway with synchronous code (a tracker, a reward function) await it through this.
    """
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, background_loop()))
