"""The one task scope of a proxied request: every piece of its work (the upstream fan-out, the
early pick's scores, the pick itself) runs in it, and leaving the scope any way (a return, an
error, the client leaving, a give-up at ``proxy.timeout_s``) cancels what still runs and waits
until it has stopped, so the request's run ends only after its last call was recorded.

    async with RequestScope() as scope:
        picking = scope.start(early.result())          # a task of the scope
        results = await pools.fan_out(conv, run_id)    # awaited in the scope's body
        selection = await scope.within(picking, 120)   # TimeoutError once it has been stopped
    # here nothing this request started is still running

The round-robin pick is a task of the scope like the rest: its judge calls are awaited on the
request's loop, so cancelling the task cancels them (blocking work joins through
``veriscale.models.cancel.in_worker``, whose worker stops at its next check).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class RequestScope:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task] = set()

    def start(self, coro: Coroutine[Any, Any, T]) -> "asyncio.Task[T]":
        """Run ``coro`` as a task of this scope (stopped when the scope is left)."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        return task

    async def within(self, task: "asyncio.Task[T]", timeout_s: float) -> T:
        """``task``'s result; past ``timeout_s`` it is cancelled and waited for, then TimeoutError."""
        try:
            return await asyncio.wait_for(asyncio.shield(task), timeout_s)
        except asyncio.TimeoutError:
            await stop_all([task])
            raise

    async def __aenter__(self) -> "RequestScope":
        return self

    async def __aexit__(self, *exc: Any) -> bool:
        while self._tasks:  # a task may start another as it stops (an arrival's score): stop those too
            tasks, self._tasks = list(self._tasks), set()
            await stop_all(tasks)
        return False


async def stop_all(tasks: list[asyncio.Task]) -> None:
    """Cancel ``tasks`` and wait until each has finished, even if the caller is cancelled meanwhile
    (its cancellation goes on once they stopped)."""
    for task in tasks:
        task.cancel()
    cancelled = False
    while not all(task.done() for task in tasks):
        try:
            await asyncio.wait([t for t in tasks if not t.done()])
        except asyncio.CancelledError:
            cancelled = True
    for task in tasks:  # retrieved, so an error of a stopped task is no "never retrieved" warning
        if not task.cancelled():
            task.exception()
    if cancelled:
        raise asyncio.CancelledError()
