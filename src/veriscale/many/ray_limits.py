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

from collections import Counter, deque
from collections.abc import Sequence
from typing import Any

from veriscale.engine.routing import (RECENT_PROMPTS, EndpointLimits, RateLimiter, Router, SlotLimiter, affine_choice,
                                      install_limits)
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


class _RemoteSlots:
    def __init__(self, desk: Any, key: str, cap: int, holder: str) -> None:
        self.desk, self.key, self.cap, self.holder = desk, key, cap, holder

    async def acquire(self) -> None:
        await self.desk.acquire.remote(self.key, self.cap, self.holder)

    def release(self) -> None:
        self.desk.release.remote(self.key, self.holder)


class _RemoteRate:
    def __init__(self, desk: Any, key: str, kind: str, per_minute: int) -> None:
        self.desk, self.key, self.kind, self.per_minute = desk, key, kind, per_minute

    async def take(self, units: int) -> None:
        await self.desk.take.remote(self.key, self.kind, self.per_minute, units)


def limit_key(backend: Any) -> str:
    """The endpoint a backend's calls count against, cluster-wide (its ``limit_key``, else its URI)."""
    return endpoint_key(backend) or str(backend.uri)


def install_remote_limits(backend: Any, desk: Any, *, holder: str, concurrency: int, rpm: int = 0,
                          tpm: int = 0) -> None:
    """Make ``desk`` the limits of ``backend``'s endpoint in this worker (not for the embedded model)."""
    if backend.is_embedded:
        return
    key = limit_key(backend)
    cap = own_concurrency(backend) or concurrency
    install_limits(backend, EndpointLimits(
        f"cluster:{key}", _RemoteSlots(desk, key, cap, holder),
        _RemoteRate(desk, key, "requests", rpm) if rpm else None,
        _RemoteRate(desk, key, "tokens", tpm) if tpm else None))


class _RemoteRouter:
    def __init__(self, desk: Any, pool: tuple[str, ...]) -> None:
        self.desk, self.pool = desk, pool

    async def route(self, prompt: str) -> int:
        index: int = await self.desk.route.remote(self.pool, prompt)
        return index


def remote_router(backends: Sequence[Any], desk: Any) -> Router | None:
    """The desk as the affinity router of a pool of ``backends`` (None for one endpoint, or the
    embedded model, which no other process shares)."""
    if len(backends) < 2 or any(b.is_embedded for b in backends):
        return None
    return _RemoteRouter(desk, tuple(limit_key(b) for b in backends))
