"""Limits a call waits on, shared across threads and event loops: a rate bucket and call slots.

    rate = RateLimiter(600)              # 600 units a minute (requests, or prompt tokens)
    await rate.take(1200)                # waits off any debt
    slots = SlotLimiter(4)               # at most 4 holders, first come first served
    await slots.acquire()
    try: ...
    finally: slots.release()

``Slots`` and ``Rate`` are what an endpoint needs of them: :mod:`veriscale.engine.routing` gives each
endpoint these, a Ray cluster its shared desk (``veriscale.many.ray_limits``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Literal, Protocol

from veriscale.errors import UserError


class RateLimiter:
    """A token bucket refilled continuously: ``per_minute`` units a minute, bursts up to that.
    Safe across threads and event loops (a taker reserves its units, then sleeps off the debt)."""

    def __init__(self, per_minute: int) -> None:
        if per_minute < 1:
            raise UserError(f"rate limit {per_minute} per minute is below 1: give a positive number or none")
        self.per_minute = per_minute
        self._level = float(per_minute)
        self._at = time.monotonic()
        self._lock = threading.Lock()

    async def take(self, units: int) -> None:
        """Wait until ``units`` are available (a request larger than a minute's worth waits for a full bucket)."""
        units = min(max(units, 0), self.per_minute)
        with self._lock:
            now = time.monotonic()
            self._level = min(self.per_minute, self._level + (now - self._at) * self.per_minute / 60.0)
            self._at = now
            self._level -= units
            debt = -self._level
        if debt > 0:
            await asyncio.sleep(debt * 60.0 / self.per_minute)


@dataclass(eq=False)
class _Waiter:
    """One acquirer waiting for a slot: its loop, the future that wakes it, and where it stands."""

    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]
    state: Literal["waiting", "granted", "gone"] = "waiting"


class SlotLimiter:
    """At most ``cap`` holders at once, first come first served, shared by any number of event
    loops and threads (an ``asyncio.Semaphore`` belongs to one loop)::

        await slots.acquire()
        try: ...
        finally: slots.release()
    """

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.held = 0
        self._lock = threading.Lock()
        self._waiters: deque[_Waiter] = deque()

    @property
    def waiting(self) -> int:
        """How many acquirers wait for a slot now."""
        return len(self._waiters)

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self.held < self.cap and not self._waiters:
                self.held += 1
                return
            waiter = _Waiter(loop, loop.create_future())
            self._waiters.append(waiter)
        try:
            await waiter.future
        except asyncio.CancelledError:
            with self._lock:
                if waiter.state == "waiting":
                    waiter.state = "gone"
                    self._waiters.remove(waiter)
                    raise
            self.release()  # the slot was handed over as the wait was cancelled: pass it on
            raise

    def try_acquire(self) -> bool:
        """Take a slot if one is free and nobody waits for one (no waiting)."""
        with self._lock:
            if self.held < self.cap and not self._waiters:
                self.held += 1
                return True
            return False

    def release(self) -> None:
        with self._lock:
            while self._waiters:
                waiter = self._waiters.popleft()
                if waiter.loop.is_closed():
                    waiter.state = "gone"
                    continue
                try:
                    waiter.loop.call_soon_threadsafe(_wake, waiter.future)
                except RuntimeError:  # its loop closed meanwhile
                    waiter.state = "gone"
                    continue
                waiter.state = "granted"  # the slot passes straight to this waiter
                return
            self.held -= 1


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Slots(Protocol):
    """Call slots: :class:`SlotLimiter` in one process, a cluster's shared desk on Ray workers
    (``veriscale.many.ray_limits``)."""

    cap: int

    async def acquire(self) -> None: ...

    def release(self) -> None: ...


class Rate(Protocol):
    """A rate bucket: :class:`RateLimiter`, or a cluster's shared one."""

    per_minute: int

    async def take(self, units: int) -> None: ...


__all__ = ["Rate", "RateLimiter", "SlotLimiter", "Slots"]
