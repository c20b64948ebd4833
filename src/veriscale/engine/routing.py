"""Where a model call goes: a pool of endpoints of one model, with prefix affinity and limits.

Calls that share a prompt prefix go to the same endpoint, so its prefix cache hits: a prompt
goes where a recent prompt shares at least half of it (the calls of one comparison, the turns
of one conversation), unless that endpoint is far busier than the others; any other prompt goes
to the endpoint with the fewest calls in flight. Each endpoint runs
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
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from veriscale.errors import UserError, setting
from veriscale.models.base import ModelBackend

#: A prompt sticks to an endpoint that recently saw a prompt sharing this fraction of it.
MIN_SHARED_FRACTION = 0.5
#: Recent prompts remembered per endpoint.
RECENT_PROMPTS = 16
#: An endpoint with this many more calls in flight than the least busy one gets no sticky calls.
BALANCE_SLACK = 16
#: ``affinity`` (default: same prefix, same endpoint) or ``round_robin`` (for comparison).
ROUTINGS = ("affinity", "round_robin")


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
    recent: deque = field(default_factory=lambda: deque(maxlen=RECENT_PROMPTS), repr=False)
    _slots: asyncio.Semaphore | None = field(default=None, repr=False)

    def shared_prefix(self, prompt: str) -> int:
        """Characters ``prompt`` shares with the recent prompt it shares most with."""
        return max((common_prefix_length(prompt, seen) for seen in self.recent), default=0)

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


def common_prefix_length(a: str, b: str) -> int:
    """Length of the longest common prefix (binary search over C-speed slice comparisons)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


class EndpointPool:
    """Endpoints that serve one model; the first one's fingerprint names the model in the cache."""

    def __init__(self, backends: Sequence[ModelBackend], *, concurrency: int = 8,
                 rpm: int | None = None, tpm: int | None = None, routing: str = "affinity",
                 deadline_s: float | None = None) -> None:
        self.deadline_s = deadline_s  # per call; the gateway uses it when it is given none
        if routing not in ROUTINGS:
            raise UserError(f"unknown routing '{routing}': use one of {', '.join(ROUTINGS)}")
        self.routing = routing
        self._turn = 0
        if not backends:
            raise UserError(f"no model endpoints given: give {setting('model')} at least once")
        if concurrency < 1:
            raise UserError(f"{setting('concurrency')} {concurrency} is below 1: give how many calls an endpoint may run at once")
        self.endpoints = [
            Endpoint(b, 1 if getattr(b, "is_embedded", False) else concurrency,
                     RateLimiter(rpm) if rpm else None, RateLimiter(tpm) if tpm else None)
            for b in backends
        ]
        self.primary = backends[0]

    @property
    def is_embedded(self) -> bool:
        return bool(getattr(self.primary, "is_embedded", False))

    def __getattr__(self, name: str):
        """Everything else (uri, display_name, fingerprint, count_tokens, ...) is the first endpoint's,
        so a pool stands wherever one backend does."""
        if name.startswith("_") or name in ("endpoints", "primary", "deadline_s", "routing"):
            raise AttributeError(name)
        return getattr(self.primary, name)

    def pick(self, prompt: str) -> Endpoint:
        """The endpoint for a prompt (see the module docstring); remembers the prompt there."""
        if len(self.endpoints) == 1:
            return self.endpoints[0]
        if self.routing == "round_robin":
            self._turn += 1
            return self.endpoints[(self._turn - 1) % len(self.endpoints)]
        least = min(self.endpoints, key=lambda e: (e.in_flight, e.served))
        shared = [(e.shared_prefix(prompt), -e.in_flight, i) for i, e in enumerate(self.endpoints)]
        length, _, index = max(shared)
        chosen = self.endpoints[index]
        if length < MIN_SHARED_FRACTION * len(prompt) or chosen.in_flight > least.in_flight + BALANCE_SLACK:
            chosen = least
        chosen.recent.append(prompt)
        return chosen
