"""One set of endpoint limits for a whole Ray cluster: a desk actor holds each endpoint's call slots
and rate buckets, and every worker's gateway takes its slots there, so however many workers run,
an endpoint never has more than ``--concurrency`` calls in flight (nor more than ``--rpm`` /
``--tpm`` a minute)::

    desk = start_desk()                                  # on the driver, once
    install_remote_limits(backend, desk, holder=attempt_id, concurrency=4, rpm=0, tpm=0)   # on a worker
    desk.release_all.remote(attempt_id)                  # on the driver, when that attempt ends

A worker that dies holding slots would keep them forever, and its acquires still queued at the desk
would take the next ones; each attempt takes its slots as a ``holder`` the driver names (unique: the desk outlives runs of one driver), and when an
attempt ends the driver frees what it holds and the desk passes on whatever its queued acquires get.
The embedded model keeps its own one-call limit in each worker (each worker loads its own copy).

The desk also makes the prefix-affinity decision for a pool of several endpoints
(:func:`remote_router`): each worker's pool asks it where a prompt goes, and it answers from the
prompts every worker sent and the slots held cluster-wide, so calls that share a prefix reach one
endpoint (and its prefix cache) from whichever worker they come.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from collections.abc import Sequence
from typing import Any

from veriscale.engine.routing import (MIN_SHARED_FRACTION, RECENT_PROMPTS, EndpointLimits, RateLimiter, Router,
                                      SlotLimiter, affine_choice, common_prefix_length, install_limits)
from veriscale.models.abilities import endpoint_key, own_concurrency


class EndpointDesk:
    """The body of the desk actor (an async Ray actor: waits for a slot without blocking the others)."""

    def __init__(self) -> None:
        self.slots: dict[str, SlotLimiter] = {}
        self.rates: dict[tuple[str, str], RateLimiter] = {}
        self.held: dict[str, Counter[str]] = {}  # endpoint -> holder -> slots held
        self.peak: Counter[str] = Counter()  # the most slots of an endpoint ever held at once
        self.gone: set[str] = set()  # holders whose attempt ended: what they still wait for is passed on
        self.recent: dict[tuple[str, ...], list[deque[str]]] = {}  # pool (its endpoints' keys) -> recent prompts each
        self.routed: dict[tuple[str, ...], list[int]] = {}  # pool -> prompts sent to each endpoint

    async def acquire(self, key: str, cap: int, holder: str) -> None:
        slots = self.slots.setdefault(key, SlotLimiter(cap))
        await slots.acquire()
        if holder in self.gone:  # a dead worker's acquire, still queued here when it died: pass the slot on
            slots.release()
            return
        self.held.setdefault(key, Counter())[holder] += 1
        self.peak[key] = max(self.peak[key], slots.held)

    async def lease(self, key: str, cap: int, holder: str, want: int) -> int:
        """Up to ``want`` slots for ``holder``: waits for one, then takes as many more as are free now;
        how many it got (0: ``holder``'s attempt has ended)."""
        await self.acquire(key, cap, holder)
        if holder in self.gone:
            return 0
        slots, got = self.slots[key], 1
        while got < want and slots.try_acquire():
            got += 1
        self.held[key][holder] += got - 1
        self.peak[key] = max(self.peak[key], slots.held)
        return got

    def give_back(self, key: str, holder: str, count: int) -> None:
        """``holder`` no longer needs ``count`` of the slots it leased."""
        for _ in range(count):
            self.release(key, holder)

    def release(self, key: str, holder: str) -> None:
        held = self.held.get(key)
        if held is not None and held[holder] > 0:
            held[holder] -= 1
            self.slots[key].release()

    def release_all(self, holder: str) -> int:
        """Free every slot ``holder`` still holds (its worker finished or died), and pass on the slots its
        still-queued acquires would get; how many were held."""
        self.gone.add(holder)
        freed = 0
        for key, held in self.held.items():
            while held[holder] > 0:
                held[holder] -= 1
                self.slots[key].release()
                freed += 1
        return freed

    async def take(self, key: str, kind: str, per_minute: int, units: int) -> None:
        await self.rates.setdefault((key, kind), RateLimiter(per_minute)).take(units)

    def route(self, pool: tuple[str, ...], prompt: str) -> int:
        """Which endpoint of ``pool`` takes ``prompt``: the affinity rule over every worker's recent
        prompts, with the calls in flight (held or waiting for a slot here) as each endpoint's load."""
        recent = self.recent.setdefault(pool, [deque(maxlen=RECENT_PROMPTS) for _ in pool])
        routed = self.routed.setdefault(pool, [0] * len(pool))
        loads = [(self._in_flight(key), routed[i]) for i, key in enumerate(pool)]
        index = affine_choice(prompt, recent, loads)
        recent[index].append(prompt)
        routed[index] += 1
        return index

    def routed_counts(self, pool: tuple[str, ...]) -> list[int]:
        return list(self.routed.get(pool, [0] * len(pool)))

    def _in_flight(self, key: str) -> int:
        slots = self.slots.get(key)
        return slots.held + slots.waiting if slots else 0

    def state(self, key: str) -> dict[str, int]:
        """Slots held and waited for now, and the peak (for tests and the scaling benchmark)."""
        slots = self.slots.get(key)
        return {"held": slots.held if slots else 0, "waiting": slots.waiting if slots else 0, "peak": self.peak[key]}


#: the desk's actor name, in the driver's own Ray namespace (one desk a driver, found by its workers)
DESK_NAME = "veriscale-endpoint-desk"


def start_desk() -> Any:
    """The desk actor of this driver (one a driver, however many runs it starts; it ends with it),
    on the driver's own node: a worker node that leaves never takes the limits with it."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
    return ray.remote(num_cpus=0, max_concurrency=1000)(EndpointDesk).options(
        name=DESK_NAME, get_if_exists=True, scheduling_strategy=here).remote()


#: a leased slot goes back to the desk after this many calls here (other workers waiting get their turn)
LEASE_REUSES = 32
#: leased slots unused here this long go back to the desk
LEASE_IDLE_S = 0.05


class _LeasedSlots:
    """One attempt's share of an endpoint's cluster-wide slots: leased from the desk in blocks (as many
    as calls wait here, as many as are free there), reused here for the next calls, and given back
    when unused for :data:`LEASE_IDLE_S` or after :data:`LEASE_REUSES` calls. Every leased slot
    counts at the desk, so the cluster never has more than ``cap`` calls in flight; a call costs a
    desk round trip only when this attempt has no leased slot free (on the attempt's one loop)."""

    def __init__(self, desk: Any, key: str, cap: int, holder: str, idle_s: float = LEASE_IDLE_S) -> None:
        self.desk, self.key, self.cap, self.holder, self.idle_s = desk, key, cap, holder, idle_s
        self.free = 0  # leased and unused
        self.uses = 0  # calls since a slot last went back
        self.waiters: deque[asyncio.Future[None]] = deque()
        self.leasing: asyncio.Task[None] | None = None
        self.idle: asyncio.TimerHandle | None = None

    async def acquire(self) -> None:
        if self.free and not self.waiters:
            self.free -= 1
            return
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self.waiters.append(waiter)
        if self.leasing is None:
            self.leasing = loop.create_task(self._lease())
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter in self.waiters:
                self.waiters.remove(waiter)
            elif waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self.release()  # the slot was handed over as the wait was cancelled: pass it on
            raise

    async def _lease(self) -> None:
        try:
            while self.waiters:
                got = await self.desk.lease.remote(self.key, self.cap, self.holder, len(self.waiters))
                if not got:
                    raise RuntimeError("the desk took this attempt's slots back (the driver ended it)")
                self.free += got
                self._hand_over()
        except BaseException as exc:  # noqa: BLE001 - the desk is gone or refused: every waiter hears it
            while self.waiters:
                waiter = self.waiters.popleft()
                if not waiter.done():
                    waiter.set_exception(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
            if not isinstance(exc, Exception):
                raise
        finally:
            self.leasing = None
        self._idle_later()

    def _hand_over(self) -> None:
        while self.free and self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                self.free -= 1
                waiter.set_result(None)

    def release(self) -> None:
        self.free += 1
        self.uses += 1
        if self.uses >= LEASE_REUSES:  # others may be waiting at the desk: this slot goes back in line
            self.uses = 0
            self.free -= 1
            self.desk.give_back.remote(self.key, self.holder, 1)
        self._hand_over()
        if self.waiters and self.leasing is None:
            self.leasing = asyncio.get_running_loop().create_task(self._lease())
        self._idle_later()

    def _idle_later(self) -> None:
        if self.free and not self.waiters and self.idle_s <= 0:
            self._give_back_idle()  # kept by nobody: back at once
        elif self.free and not self.waiters and self.idle is None:
            self.idle = asyncio.get_running_loop().call_later(self.idle_s, self._give_back_idle)

    def _give_back_idle(self) -> None:
        self.idle = None
        if self.free and not self.waiters:
            count, self.free = self.free, 0
            self.desk.give_back.remote(self.key, self.holder, count)


class _RemoteRate:
    def __init__(self, desk: Any, key: str, kind: str, per_minute: int) -> None:
        self.desk, self.key, self.kind, self.per_minute = desk, key, kind, per_minute

    async def take(self, units: int) -> None:
        await self.desk.take.remote(self.key, self.kind, self.per_minute, units)


def limit_key(backend: Any) -> str:
    """The endpoint a backend's calls count against, cluster-wide (its ``limit_key``, else its URI)."""
    return endpoint_key(backend) or str(backend.uri)


def install_remote_limits(backend: Any, desk: Any, *, holder: str, concurrency: int, rpm: int = 0,
                          tpm: int = 0, lease_idle_s: float = LEASE_IDLE_S) -> None:
    """Make ``desk`` the limits of ``backend``'s endpoint in this worker (not for the embedded model).
    ``lease_idle_s``: how long leased slots stay here unused (0: back as soon as no call here wants
    them, for a holder nobody frees when it dies, such as a reward replica whose pool is killed)."""
    if backend.is_embedded:
        return
    key = limit_key(backend)
    cap = own_concurrency(backend) or concurrency
    install_limits(backend, EndpointLimits(
        f"cluster:{key}", _LeasedSlots(desk, key, cap, holder, lease_idle_s),
        _RemoteRate(desk, key, "requests", rpm) if rpm else None,
        _RemoteRate(desk, key, "tokens", tpm) if tpm else None))


class _RemoteRouter:
    """The desk's affinity decision, asked once per prefix: a prompt that shares most of its prefix
    with one this worker routed lately goes where that one went (the rule of
    :func:`~veriscale.engine.routing.affine_choice`, without a round trip); any other prompt is decided
    at the desk, which sees every worker's new prefixes."""

    def __init__(self, desk: Any, pool: tuple[str, ...]) -> None:
        self.desk, self.pool = desk, pool
        self.recent: list[deque[str]] = [deque(maxlen=RECENT_PROMPTS) for _ in pool]
        self.asked = 0  # prompts decided at the desk (the others: here)

    async def route(self, prompt: str) -> int:
        length, _, index = max((max((common_prefix_length(prompt, seen) for seen in recent), default=0), -i, i)
                               for i, recent in enumerate(self.recent))
        if length < MIN_SHARED_FRACTION * len(prompt) or not length:
            index = await self.desk.route.remote(self.pool, prompt)
            self.asked += 1
        self.recent[index].append(prompt)
        return index


def remote_router(backends: Sequence[Any], desk: Any) -> Router | None:
    """The desk as the affinity router of a pool of ``backends`` (None for one endpoint, or the
    embedded model, which no other process shares)."""
    if len(backends) < 2 or any(b.is_embedded for b in backends):
        return None
    return _RemoteRouter(desk, tuple(limit_key(b) for b in backends))


def worker_backends(uris: Sequence[str], probed: Sequence[dict[str, Any] | None] | None, desk: Any, *, holder: str,
                    concurrency: int, rpm: int = 0, tpm: int = 0, lease_idle_s: float = LEASE_IDLE_S) -> list[Any]:
    """The backends a Ray worker or reward replica calls: each loaded from its URI, given what the
    driver's probe of its endpoint found (so nothing probes it again), and its calls taking their
    slots at ``desk`` under ``holder`` (``desk`` None: this process's own limits)."""
    from veriscale.models.abilities import ProbedState
    from veriscale.models.uri import load_backend

    backends = [load_backend(uri) for uri in uris]
    for backend, state in zip(backends, probed or []):
        if state is not None and isinstance(backend, ProbedState):
            backend.adopt_probed_state(state)
    if desk is not None:
        for backend in backends:
            install_remote_limits(backend, desk, holder=holder, concurrency=concurrency, rpm=rpm, tpm=tpm,
                                  lease_idle_s=lease_idle_s)
    return backends
