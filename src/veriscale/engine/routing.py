"""Where a model call goes: a pool of endpoints of one model, with prefix affinity and limits.

Calls that share a prompt prefix go to the same endpoint, so its prefix cache hits: a prompt
goes where a recent prompt shares at least half of it (the calls of one comparison, the turns
of one conversation), unless that endpoint is far busier than the others; any other prompt goes
to the endpoint with the fewest calls in flight::

    pool = EndpointPool([backend_a, backend_b], concurrency=8, rpm=600)
    endpoint = await pool.choose(prompt_text)   # pool.pick() decides here; a router elsewhere
    async with endpoint.slot(tokens=1200):
        await endpoint.backend.ascore(request)

Limits belong to the endpoint, once per process: every pool (every Gateway, every Verifier, on
any event loop) that calls the same server and model (``backend.limit_key``: the base URL and
model id; an object without one is its own endpoint) shares one :class:`EndpointLimits`, so two
verifiers in one process put the load of one on a server. The one concurrency rule: an
endpoint runs at most its own cap at once (the model URI's ``?concurrency=``, the backend's
``concurrency`` attribute), else the ``concurrency`` setting of the first pool in the process
that uses it (``--concurrency``, ``gateway.concurrency``, default 4); the embedded model runs
one call at a time, in order, so its KV reuse holds. ``rpm`` and ``tpm`` (requests and prompt
tokens a minute) are set by the first pool that gives them, and lowered by a later pool that
gives a stricter one (the stricter limit holds for every pool of the process).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections import deque
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from veriscale.engine.limiters import Rate, RateLimiter, SlotLimiter, Slots
from veriscale.errors import UserError, setting
from veriscale.models.abilities import aclose_backend, endpoint_key, own_concurrency
from veriscale.models.base import ChatResponse, ModelBackend, ScoreRequest, ScoreResponse

#: A prompt sticks to an endpoint that recently saw a prompt sharing this fraction of it.
MIN_SHARED_FRACTION = 0.5
#: Recent prompts remembered per endpoint.
RECENT_PROMPTS = 16
#: An endpoint with this many more calls in flight than the least busy one gets no sticky calls.
BALANCE_SLACK = 16
#: ``affinity`` (default: same prefix, same endpoint) or ``round_robin`` (for comparison).
ROUTINGS = ("affinity", "round_robin")


@dataclass
class EndpointLimits:
    """What limits one endpoint in this process: call slots and rate buckets."""

    key: str
    slots: Slots
    requests: Rate | None = None
    tokens: Rate | None = None

    @property
    def concurrency(self) -> int:
        return self.slots.cap


_LIMITS_LOCK = threading.Lock()
_LIMITS: dict[str, EndpointLimits] = {}
_LIMITS_BY_OBJECT: weakref.WeakKeyDictionary[Any, EndpointLimits] = weakref.WeakKeyDictionary()


def endpoint_limits(backend: ModelBackend, *, concurrency: int, rpm: int | None = None,
                    tpm: int | None = None) -> EndpointLimits:
    """The process's one :class:`EndpointLimits` for ``backend`` (see the module docstring for the rule)."""
    key = endpoint_key(backend)
    with _LIMITS_LOCK:
        found = _LIMITS.get(key) if key else _LIMITS_BY_OBJECT.get(backend)
        if found is None:
            cap = 1 if backend.is_embedded else own_concurrency(backend) or concurrency
            found = EndpointLimits(key or f"object:{id(backend)}", SlotLimiter(cap),
                                   RateLimiter(rpm) if rpm else None, RateLimiter(tpm) if tpm else None)
            if key:
                _LIMITS[key] = found
            else:
                _LIMITS_BY_OBJECT[backend] = found
        else:  # another pool of this process on the same endpoint: the stricter rate limit holds for both
            if rpm and (found.requests is None or rpm < found.requests.per_minute):
                found.requests = RateLimiter(rpm)
            if tpm and (found.tokens is None or tpm < found.tokens.per_minute):
                found.tokens = RateLimiter(tpm)
        return found


def install_limits(backend: ModelBackend, limits: EndpointLimits) -> None:
    """Make ``limits`` the process's limits of ``backend``'s endpoint (a Ray worker installs the
    cluster's shared ones before any pool is built, so :func:`endpoint_limits` finds them)."""
    key = endpoint_key(backend)
    with _LIMITS_LOCK:
        if key:
            _LIMITS[key] = limits
        else:
            _LIMITS_BY_OBJECT[backend] = limits


@dataclass
class Endpoint:
    """One backend instance of a pool, and the process-wide limits of its endpoint."""

    backend: ModelBackend
    limits: EndpointLimits
    in_flight: int = 0
    served: int = 0
    recent: deque[str] = field(default_factory=lambda: deque(maxlen=RECENT_PROMPTS), repr=False)

    @property
    def concurrency(self) -> int:
        return self.limits.concurrency

    @property
    def tokens(self) -> Rate | None:
        return self.limits.tokens

    @contextlib.asynccontextmanager
    async def slot(self, tokens: int = 0) -> AsyncIterator[None]:
        """Hold one of the endpoint's call slots (after the rate limits allow it)."""
        self.in_flight += 1
        try:
            await self.limits.slots.acquire()
            try:
                if self.limits.requests is not None:
                    await self.limits.requests.take(1)
                if self.limits.tokens is not None:
                    await self.limits.tokens.take(tokens)
                self.served += 1
                yield
            finally:
                self.limits.slots.release()
        finally:
            self.in_flight -= 1


def affine_choice(prompt: str, recents: Sequence[Iterable[str]], loads: Sequence[tuple[int, int]]) -> int:
    """The affinity rule (module docstring) over endpoints given as their recent prompts and their
    ``(in flight, served)``: the index of the endpoint ``prompt`` goes to.

        affine_choice("ab" * 40, [["ab" * 39], []], [(0, 5), (0, 0)])   # 0: it shares most of its prefix
        affine_choice("zz" * 40, [["ab" * 39], []], [(0, 5), (0, 0)])   # 1: nothing shared, the least busy
    """
    least = min(range(len(loads)), key=lambda i: loads[i])
    length, _, index = max((max((common_prefix_length(prompt, seen) for seen in recent), default=0), -loads[i][0], i)
                           for i, recent in enumerate(recents))
    if length < MIN_SHARED_FRACTION * len(prompt) or loads[index][0] > loads[least][0] + BALANCE_SLACK:
        return least
    return index


class Router(Protocol):
    """Decides elsewhere which endpoint of a pool a prompt goes to (the Ray desk: one decision for a
    whole cluster, so calls sharing a prefix reach one endpoint from any worker); an index into the pool."""

    async def route(self, prompt: str) -> int: ...


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


def _first_endpoints(name: str) -> Any:
    """A pool member that is its first endpoint's ``name``; an AttributeError where that backend has none."""
    return property(lambda pool: getattr(pool.primary, name), doc=f"the first endpoint's ``{name}``, where it has one")


#: the optional abilities a pool has exactly when its first endpoint has them (read from it)
POOL_ABILITIES = ("read_plan", "supports_joint", "calls_per_score", "chat_options", "top_logprobs", "scorer",
                  "reasoner", "tokenizer_requests", "token_spans", "calibration_key", "retry_variant", "afingerprint",
                  "aweights_fingerprint", "asingle_token_labels", "ascore", "achat")


_POOL_CLASSES: dict[tuple[type, frozenset[str]], type] = {}


def _pool_class(base: type, present: frozenset[str]) -> type:
    """``base`` with a property for each ability in ``present``: an ability Protocol's ``isinstance``
    (which reads the class) sees on the pool what it sees on the first endpoint, no more."""
    if not present:
        return base
    found = _POOL_CLASSES.get((base, present))
    if found is None:
        members: dict[str, Any] = {name: _first_endpoints(name) for name in sorted(present)}
        found = _POOL_CLASSES.setdefault((base, present), type(base.__name__, (base,), {
            **members, "__qualname__": base.__qualname__, "__module__": base.__module__}))
    return found


class EndpointPool:
    """Endpoints that serve one model; the first one's fingerprint names the model in the cache.
    The optional abilities (:data:`POOL_ABILITIES`) are the first endpoint's, present exactly when it has them."""

    def __new__(cls, backends: Sequence[ModelBackend], *args: Any, **kwargs: Any) -> "EndpointPool":
        present = frozenset(name for name in POOL_ABILITIES if backends and hasattr(backends[0], name))
        pool: EndpointPool = super().__new__(_pool_class(cls, present))
        return pool

    def __init__(self, backends: Sequence[ModelBackend], *, concurrency: int = 8,
                 rpm: int | None = None, tpm: int | None = None, routing: str = "affinity",
                 deadline_s: float | None = None, router: Router | None = None) -> None:
        self.deadline_s = deadline_s
        self.router = router  # where the affinity decision is made, when not here  # per call; the gateway uses it when it is given none
        if routing not in ROUTINGS:
            raise UserError(f"unknown routing '{routing}': use one of {', '.join(ROUTINGS)}")
        self.routing = routing
        self._turn = 0
        if not backends:
            raise UserError(f"no model endpoints given: give {setting('model')} at least once")
        if concurrency < 1:
            raise UserError(f"{setting('concurrency')} {concurrency} is below 1: give how many calls an endpoint may run at once")
        self.endpoints = [Endpoint(b, endpoint_limits(b, concurrency=concurrency, rpm=rpm, tpm=tpm)) for b in backends]
        self.primary = backends[0]

    # -- the pool as a backend: what ModelBackend declares is the first endpoint's (the model's name
    # in the cache), so a pool stands wherever one backend does ------------------------------------
    @property
    def is_embedded(self) -> bool:
        return bool(getattr(self.primary, "is_embedded", False))

    @property
    def uri(self) -> str:
        return self.primary.uri

    @property
    def display_name(self) -> str:
        return self.primary.display_name

    def fingerprint(self) -> str:
        return self.primary.fingerprint()

    def score(self, request: ScoreRequest) -> ScoreResponse:
        return self.primary.score(request)

    def count_tokens(self, text: str) -> int:
        return self.primary.count_tokens(text)

    def context_size(self) -> int | None:
        return self.primary.context_size()

    def single_token_labels(self, labels: tuple[str, ...]) -> list[str]:
        return self.primary.single_token_labels(labels)

    def chat(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResponse:
        return self.primary.chat(messages, **kwargs)

    async def aclose(self) -> None:
        """Close every endpoint's backend (each once)."""
        for backend in {id(e.backend): e.backend for e in self.endpoints}.values():
            await aclose_backend(backend)

    def pick(self, prompt: str) -> Endpoint:
        """The endpoint for a prompt, decided here (see the module docstring); remembers the prompt there."""
        if len(self.endpoints) == 1:
            return self.endpoints[0]
        if self.routing == "round_robin":
            self._turn += 1
            return self.endpoints[(self._turn - 1) % len(self.endpoints)]
        index = affine_choice(prompt, [e.recent for e in self.endpoints],
                              [(e.in_flight, e.served) for e in self.endpoints])
        chosen = self.endpoints[index]
        chosen.recent.append(prompt)
        return chosen

    async def choose(self, prompt: str) -> Endpoint:
        """The endpoint for a prompt: the pool's ``router`` decides where one is installed (a Ray
        cluster's desk, which sees every worker's calls), else :meth:`pick` here."""
        if self.router is not None and len(self.endpoints) > 1 and self.routing == "affinity":
            return self.endpoints[await self.router.route(prompt)]
        return self.pick(prompt)
