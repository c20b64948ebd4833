"""The one event loop the synchronous facade runs the gateway on (a daemon thread per process).

    outcomes = run_sync(gateway.run(calls))       # from ordinary synchronous code

Async callers (the server, proxies, RL reward functions) await the gateway directly on their own
loop instead; calling :func:`run_sync` from inside a running loop is refused.

The coroutine runs in a copy of the caller's context (its context variables, such as the current
run of :mod:`veriscale.engine.run_scope`), though it runs on the loop's thread; the worker threads
the gateway hands blocking calls to (``asyncio.to_thread``) copy it in turn.

Cancellation crosses the hop and is waited for, so the work a caller started has stopped (and
its calls are recorded ``cancelled``) before the caller's own cancellation goes on:

- an async caller of :func:`on_gateway_loop` that is cancelled cancels the task on the gateway
  loop and waits until it has finished;
- synchronous code in a worker of ``veriscale.models.cancel.in_worker`` (a proxy's round-robin
  pick) calls :func:`run_sync` under that worker's stop flag: when the awaiting task is
  cancelled the flag is set, the gateway task is cancelled and waited for, and ``run_sync``
  raises ``Stopped`` (a later ``run_sync`` under the set flag raises it before starting).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, Generic, TypeVar

from veriscale.models.cancel import Stopped, current_stop

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


class _Remote(Generic[T]):
    """A coroutine running as a task on the gateway loop; ``done`` settles only once that task has
    finished (a cancelled one included), unlike ``run_coroutine_threadsafe``'s future."""

    def __init__(self, coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop,
                 context: contextvars.Context) -> None:
        self.loop = loop
        self.done: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._task: asyncio.Task | None = None
        self._cancelled = False
        loop.call_soon_threadsafe(self._start, coro, context)

    def _start(self, coro: Coroutine[Any, Any, T], context: contextvars.Context) -> None:
        if self._cancelled:  # cancelled before it started: it never runs
            coro.close()
            self.done.cancel()
            return
        self._task = self.loop.create_task(coro, context=context)
        self._task.add_done_callback(self._settle)

    def _settle(self, task: asyncio.Task) -> None:
        if task.cancelled():
            self.done.cancel()
        elif task.exception() is not None:
            self.done.set_exception(task.exception())
        else:
            self.done.set_result(task.result())

    def cancel(self) -> None:
        """Cancel the task (from any thread); ``done`` settles once it has stopped."""
        def cancel_now() -> None:
            self._cancelled = True
            if self._task is not None:
                self._task.cancel()

        self.loop.call_soon_threadsafe(cancel_now)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the gateway loop and wait for its result (exceptions propagate); under an
    ``in_worker`` stop flag, a set flag cancels it and raises ``Stopped`` (module docstring)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        coro.close()
        raise RuntimeError("the synchronous gateway facade was called from inside an event loop: await the Gateway instead")
    stop = current_stop()
    if stop is not None and stop.is_set():
        coro.close()
        raise Stopped()
    remote = _submit(coro)
    if stop is None:
        return remote.done.result()
    undo = stop.on_set(remote.cancel)
    try:
        return remote.done.result()
    except concurrent.futures.CancelledError:
        if stop.is_set():
            raise Stopped() from None
        raise
    finally:
        undo()


def _submit(coro: Coroutine[Any, Any, T]) -> _Remote[T]:
    """Start ``coro`` on the gateway loop as a task that runs in a copy of the caller's context."""
    return _Remote(coro, background_loop(), contextvars.copy_context())


async def on_gateway_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` from any event loop while it runs on the gateway loop.

    A gateway's locks and limits belong to the loop it runs on, so async callers that share a
    gateway with synchronous code (a tracker, a reward function) await it through this. A
    cancelled caller cancels the gateway task and waits until it stopped before it raises.
    """
    remote = _submit(coro)
    waiting = asyncio.wrap_future(remote.done)
    try:
        return await asyncio.shield(waiting)
    except asyncio.CancelledError:
        if waiting.done():  # the gateway task itself was cancelled: nothing left to stop
            raise
        remote.cancel()
        while not waiting.done():
            try:
                await asyncio.wait({waiting})
            except asyncio.CancelledError:  # cancelled again while it stops: it is stopping already
                pass
        raise
