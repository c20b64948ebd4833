"""Blocking model work in a worker thread that stops when the task awaiting it is cancelled.

    async def ascore(self, request):
        return await in_worker(self._score, request)   # _score(request, stop=...) calls stopped(stop)

The worker gets a :class:`StopFlag` (a ``threading.Event``). Cancelling the awaiting task (a
deadline, a failed sibling, a job cancel, a client that left) sets it and then waits for the
worker to return: the worker raises :class:`Stopped` at its next check (the embedded model checks
before every token and every prompt batch), so a caller's slot is freed only once the work itself
has stopped. The flag is also the worker's :func:`current_stop`: async work the worker runs
through ``veriscale.engine.sync_edge.run`` is cancelled when it is set (one scope across threads)::

    stop = current_stop()            # inside the worker: its flag (None outside any in_worker)
    undo = stop.on_set(callback)     # called once, at the set (at once if already set)
    undo = on_stop(stop, callback)   # the same, and a no-op when stop is None

Plain threads can share one flag too (``veriscale harness run`` stops every session with it)::

    with stopping_with(stop):                         # current_stop() is stop in this block
        threading.Thread(target=in_this_context(work)).start()   # and in the thread it starts
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


class Stopped(Exception):
    """The work was asked to stop (its caller was cancelled)."""


class StopFlag(threading.Event):
    """A stop flag that also calls back whoever registered with :meth:`on_set` (any thread)."""

    def __init__(self) -> None:
        super().__init__()
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._guard = threading.Lock()
        self._next = 0

    def set(self) -> None:
        with self._guard:
            callbacks, self._callbacks = list(self._callbacks.values()), {}
            super().set()
        for callback in callbacks:
            callback()

    def on_set(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` once when the flag is set (now, if it is); returns its un-registration."""
        with self._guard:
            if not self.is_set():
                key = self._next = self._next + 1
                self._callbacks[key] = callback

                def forget() -> None:
                    self._callbacks.pop(key, None)

                return forget
        callback()
        return lambda: None


_CURRENT_STOP: contextvars.ContextVar[StopFlag | None] = contextvars.ContextVar("veriscale_stop", default=None)


def current_stop() -> StopFlag | None:
    """The stop flag of the :func:`in_worker` call this code runs in (None: none)."""
    return _CURRENT_STOP.get()


@contextlib.contextmanager
def stopping_with(stop: StopFlag) -> Iterator[StopFlag]:
    """Make ``stop`` the :func:`current_stop` of the block (and of threads started with :func:`in_this_context`)."""
    token = _CURRENT_STOP.set(stop)
    try:
        yield stop
    finally:
        _CURRENT_STOP.reset(token)


def in_this_context(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` bound to a copy of the caller's context (its current run and stop flag), for a thread to run."""
    return functools.partial(contextvars.copy_context().run, fn)


def on_stop(stop: StopFlag | None, callback: Callable[[], None]) -> Callable[[], None]:
    """``stop.on_set(callback)``, or, with no flag to wait on, an un-registration that does nothing."""
    return stop.on_set(callback) if stop is not None else _nothing


def _nothing() -> None:
    return None


def stopped(stop: threading.Event | None) -> None:
    """Raise :class:`Stopped` when ``stop`` is set (a check inside a worker's loop)."""
    if stop is not None and stop.is_set():
        raise Stopped()


def _run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn`` in the worker's frame; a StopIteration escaping it could not reach the awaiting
    coroutine (asyncio cannot carry it), so it becomes a RuntimeError."""
    try:
        return fn(*args, **kwargs)
    except StopIteration as exc:
        raise RuntimeError(f"{getattr(fn, '__qualname__', fn)} raised StopIteration") from exc


async def in_worker(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, stop=event, **kwargs)`` in a worker thread; cancelling the caller stops it (see above)."""
    stop = StopFlag()
    context = contextvars.copy_context()  # the worker sees the caller's context (its current run), as to_thread does
    context.run(_CURRENT_STOP.set, stop)  # and its own stop flag, for the gateway work it waits on
    work = asyncio.get_running_loop().run_in_executor(
        None, functools.partial(context.run, functools.partial(_run, fn, *args, stop=stop, **kwargs)))
    cancelled = False
    while True:
        try:
            result: T = await asyncio.shield(work)
            break
        except asyncio.CancelledError:  # wait on for the worker, which stops at its next check
            stop.set()
            cancelled = True
        except Stopped:
            cancelled = True
            break
    if cancelled:
        raise asyncio.CancelledError()
    return result
