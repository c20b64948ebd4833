"""Blocking model work in a worker thread that stops when the task awaiting it is cancelled.

    async def ascore(self, request):
        return await in_worker(self._score, request)   # _score(request, stop=...) calls stopped(stop)

The worker gets a ``threading.Event``. Cancelling the awaiting task (a deadline, a failed
sibling, a job cancel) sets it and then waits for the worker to return: the worker raises
:class:`Stopped` at its next check (the embedded model checks before every token and every
prompt batch), so a caller's slot is freed only once the work itself has stopped.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Stopped(Exception):
    """The work was asked to stop (its caller was cancelled)."""


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
    stop = threading.Event()
    context = contextvars.copy_context()  # the worker sees the caller's context (its current run), as to_thread does
    work = asyncio.get_running_loop().run_in_executor(
        None, functools.partial(context.run, _run, fn, *args, stop=stop, **kwargs))
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(work)
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
