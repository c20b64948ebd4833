"""The one place synchronous code runs async work: ``asyncio.run`` on the caller's own thread.

    outcomes = sync_edge.run(gateway.run(calls))      # from ordinary synchronous code
    verdict = sync_edge.run(verifier.acompare(task, a, b))

There is no private gateway loop and no thread hop: the coroutine runs on a fresh event loop in
the calling thread, and async callers (the server, the proxy, RL reward functions) simply await
the same coroutines on their own loop. What must be shared across loops is loop-free already (the
endpoint limiters of :mod:`veriscale.engine.routing`, the store's writer thread); what belongs to
one loop (an HTTP backend's async client) is closed here when the loop's work is done, so a sync
call leaves nothing open behind it. Calling :func:`run` from inside a running loop is refused.

Cancellation: under a stop flag (``veriscale.models.cancel.current_stop()``: a harness session,
a worker of ``in_worker``), a set flag cancels the coroutine, :func:`run` waits until it has
stopped (its calls are recorded ``cancelled``) and raises ``Stopped``; a flag already set raises
``Stopped`` before anything starts.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

from veriscale.models.cancel import Stopped, current_stop

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end on a new loop in this thread and return its result (see the module docstring)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        coro.close()
        raise RuntimeError("a synchronous veriscale function was called from inside an event loop: "
                           "await its async form (ascore, acompare, aselect, Gateway.run) instead")
    stop = current_stop()
    if stop is not None and stop.is_set():
        coro.close()
        raise Stopped()
    return asyncio.run(_edge(coro))


async def _edge(coro: Coroutine[Any, Any, T]) -> T:
    stop = current_stop()
    undo = None
    if stop is not None:
        loop, task = asyncio.get_running_loop(), asyncio.current_task()
        assert task is not None

        def cancel() -> None:
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop has closed: the work is over already
                pass

        undo = stop.on_set(cancel)
    try:
        return await coro
    except asyncio.CancelledError:
        if stop is not None and stop.is_set():
            raise Stopped() from None
        raise
    finally:
        if undo is not None:
            undo()
        await _close_loop_clients()


async def _close_loop_clients() -> None:
    """The HTTP backends' clients opened on this loop; with no HTTP backend made (the module never
    imported: embedded only), nothing, and httpx is not imported for it."""
    transport = sys.modules.get("veriscale.models.http_transport")
    if transport is not None:
        await transport.close_loop_clients()
