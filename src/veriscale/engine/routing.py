"""Where a model call goes: a pool of endpoints of one model, with prefix affinity and limits.

Calls that share a prompt prefix go to the same endpoint, so its prefix cache hits; a prefix
seen for the first time goes to the endpoint with the fewest calls in flight. Each endpoint runs
at most ``concurrency`` calls at once (the embedded model one, in order, so its KV reuse holds)
and, when set, at most ``rpm`` requests and ``tpm`` prompt tokens a minute::

    pool = EndpointPool([backend_a, backend_b], concurrency=8, rpm=600)
    endpoint = pool.pick(prompt_text)
    async with endpoint.slot(tokens=1200):
        await endpoint.backend.ascore(request)
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from veriscale.errors import UserError
from veriscale.models.base import ModelBackend

#: How much of a prompt decides its affinity (the stable instructions + task + candidates part).
AFFINITY_CHARS = 4000
AFFINITY_MEMORY = 4096


class RateLimiter:
    """A token bucket refilled continuously: ``per_minute`` units a minute, bursts up to that."""

    def __init__(self, per_minute: int) -> None:
        if per_minute < 1:
            raise UserError(f"rate limit {per_minute} per minute is below 1: give a positive number or none")
        self.per_minute = per_minute
        self._level = float(per_minute)
        self._at = time.monotonic()
        self._lock: asyncio.Lock | None = None

    async def take(self, units: int) -> None:
        """Wait until ``units`` are available (a request larger than a minute's worth waits for a full bucket)."""
        units = min(max(units, 0), self.per_minute)
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            while True:
                now = time.monotonic()
                self._level = min(self.per_minute, self._level + (now - self._at) * self.per_minute / 60.0)
                self._at = now
                if self._level >= units:
                    self._level -= units
                    return
                await asyncio.sleep((units - self._level) * 60.0 / self.per_minute)


@dataclass
class Endpoint:
    """One backend instance and what limits it."""

    backend: ModelBackend
    concurrency: int
    requests: RateLimiter | None = None
    tokens: RateLimiter | None = None
    in_flight: int = 0
    served: int = 0
    _slots: asyncio.Semaphore | None = field(default=None, repr=False)

    @contextlib.asynccontextmanager
    async def slot(self, tokens: int = 0) -> AsyncIterator[None]:
        """Hold one of the endpoint's call slots (after the rate limits allow it)."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.concurrency)
        self.in_flight += 1
        try:
            async with self._slots:
                if self.requests is not None:
                    await self.requests.take(1)
                if self.tokens is not None:
                    await self.tokens.take(tokens)
                self.served += 1
                yield
        finally:
            self.in_flight -= 1


class EndpointPool:
    """Endpoints that serve one model; the first one's fingerprint names the model in the cache."""

    def __init__(self, backends: Sequence[ModelBackend], *, concurrency: int = 8,
                 rpm: int | None = None, tpm: int | None = None) -> None:
        if not backends:
            raise UserError("no model endpoints given: pass --model at least once")
        if concurrency < 1:
            raise UserError(f"--concurrency {concurrency} is below 1: give how many calls an endpoint may run at once")
        self.endpoints = [
            Endpoint(b, 1 if getattr(b, "is_embedded", False) else concurrency,
                     RateLimiter(rpm) if rpm else None, RateLimiter(tpm) if tpm else None)
            for b in backends
        ]
        self.primary = backends[0]
        self._affinity: OrderedDict[str, int] = OrderedDict()

    @property
    def is_embedded(self) -> bool:
        return bool(getattr(self.primary, "is_embedded", False))

    def pick(self, prompt: str) -> Endpoint:
        """The endpoint for a prompt: the one its prefix went to before, else the least busy."""
        if len(self.endpoints) == 1:
            return self.endpoints[0]
        key = hashlib.sha256(prompt[:AFFINITY_CHARS].encode("utf-8", "replace")).hexdigest()
        index = self._affinity.get(key)
        if index is None:
            index = min(range(len(self.endpoints)), key=lambda i: (self.endpoints[i].in_flight,
                                                                   self.endpoints[i].served, i))
            self._affinity[key] = index
            if len(self._affinity) > AFFINITY_MEMORY:
                self._affinity.popitem(last=False)
        else:
            self._affinity.move_to_end(key)
        return self.endpoints[index]
