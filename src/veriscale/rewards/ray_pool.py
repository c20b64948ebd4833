"""Rewards on Ray: a pool of verifier replicas that a reward server or a veRL reward function sends
its groups to, scaling with the cluster::

    pool = reward_pool(replicas=4, model="http://10.0.0.7:8000/v1#judge")   # named "veriscale-rewards"
    rewarder = PoolRewarder(pool)            # what RewardService and VerlScorer take for a BatchRewarder
    batch = await rewarder.arewards(prompts, responses)

The pool is one async actor (:class:`RewardPool`, named ``name`` in the ``veriscale`` namespace, so
a job in any namespace of the cluster finds it with :func:`find_pool`) over ``replicas`` replica
actors (:class:`RewardReplica`), each holding its own verifier, loaded from the same model URIs and
with the same resolved settings as the rewarder the pool was made from (:func:`replica_spec`). A
batch goes whole to the least busy replica: the batch a rewarder is handed is rewarded exactly as
it would be in this process. The reward server hands over each group as it fills, so its groups
spread over the replicas.

- **One limit per endpoint for the whole cluster.** Every replica's gateway takes its call slots
  (and rpm/tpm) at the desk of :mod:`veriscale.many.ray_limits`, so however many replicas run, an
  endpoint never has more than ``concurrency`` calls in flight. ``max_calls`` holds per replica.
- **A replica that dies loses no request.** Its batch is asked again of another replica and the
  slots it held at the desk are freed; with none left the caller gets :class:`PoolUnavailable`
  (the reward server answers HTTP 503), never a reward of 0.
- **Length control is applied once, at the pool** (replicas return the judged rewards), so its
  window pools every replica's groups as one process's rewarder would.
- Replicas keep no call store: nothing they ask is cached across restarts or written to the
  caller's store.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from veriscale.errors import UserError, VeriscaleError, one_line, setting
from veriscale.rewards.batch import BatchRewarder, RewardBatch, check_pairs, length_figures
from veriscale.rewards.length import LengthControl
from veriscale.rewards.ray_replica import ReplicaSpec, RewardReplica, replica_spec

POOL_NAME = "veriscale-rewards"
POOL_NAMESPACE = "veriscale"


class PoolUnavailable(VeriscaleError):
    """No replica of the reward pool is left to answer (the reward server's HTTP 503)."""

    exit_code = 3


class RewardPool:
    """The body of the pool actor (async): routes each batch to a live replica (module docstring)."""

    def __init__(self, spec: ReplicaSpec, replicas: int) -> None:
        import ray

        from veriscale.many.ray_limits import start_desk

        self.spec = replace(spec, desk=start_desk())
        self.live: dict[int, tuple[Any, str]] = {}
        self.busy: Counter[int] = Counter()
        self.answered: Counter[int] = Counter()  # batches each replica answered
        self.lost: list[int] = []
        self.control = LengthControl() if spec.length_control == "residual" else None
        actor = ray.remote(RewardReplica).options(num_cpus=1 if spec.embedded else 0, max_concurrency=1000,
                                                  scheduling_strategy="SPREAD")
        for i in range(replicas):
            holder = f"{uuid.uuid4().hex}:reward-replica-{i}"
            self.live[i] = (actor.remote(self.spec, holder), holder)

    def describe(self) -> dict[str, Any]:
        criteria = self.spec.verifier["criteria"]
        return {"uris": self.spec.uris, "mode": self.spec.mode, "scheme": self.spec.scheme,
                "length_control": self.spec.length_control, "criteria": [c.name for c in criteria.items]}

    async def ready(self) -> str | None:
        """None once every replica has built its verifier; else the first one's error, in one sentence."""
        import ray.exceptions

        for i in list(self.live):
            try:
                broken = await self.live[i][0].ready.remote()
            except ray.exceptions.RayActorError as exc:
                return f"reward replica {i} did not start ({one_line(str(exc))[:200]})"
            if broken is not None:
                return str(broken.template)
        return None

    def replicas(self) -> dict[int, Any]:
        """The live replicas' handles, by index."""
        return {i: handle for i, (handle, _) in self.live.items()}

    def stats(self) -> dict[str, Any]:
        return {"live": sorted(self.live), "lost": list(self.lost), "answered": dict(self.answered)}

    async def rewards(self, prompts: list[str], responses: list[str | None],
                      lengths: list[int] | None = None) -> tuple[str, Any, int]:
        """``("ok", RewardBatch, replica)``, ``("error", exception, replica)`` or ``("lost", sentence, -1)``."""
        import ray.exceptions

        last = ""
        while self.live:
            i = min(self.live, key=lambda k: (self.busy[k], k))
            handle, holder = self.live[i]
            self.busy[i] += 1
            try:
                kind, value = await handle.rewards.remote(prompts, responses, lengths)
            except ray.exceptions.RayActorError as exc:  # it died, or its node went: ask another
                last = one_line(str(exc))[:200]
                await self._drop(i, holder)
                continue
            finally:
                self.busy[i] -= 1
            self.answered[i] += 1
            return kind, self._length_figures(value) if kind == "ok" else value, i
        return "lost", f"every reward replica is gone (last: {last or 'none was started'})", -1

    async def _drop(self, i: int, holder: str) -> None:
        if self.live.pop(i, None) is not None:
            self.lost.append(i)
            await self.spec.desk.release_all.remote(holder)  # the slots it died holding

    def _length_figures(self, batch: RewardBatch) -> RewardBatch:
        """BatchRewarder's length step, here once for every replica (module docstring)."""
        return length_figures(batch, self.control)


@dataclass(frozen=True)
class _Grouping:
    scheme: str  # what the request batcher reads of a rewarder's grouper


class PoolRewarder:
    """A BatchRewarder's face (``rewards``, ``arewards``, ``mode``, ``grouper.scheme``) on a pool actor:
    hand it to :class:`~veriscale.rewards.batch_rewards.RewardService` or
    :func:`~veriscale.rewards.verl.make_compute_score`."""

    def __init__(self, pool: Any) -> None:
        import ray
        import ray.exceptions

        self.pool = pool
        try:
            about = ray.get(pool.describe.remote())
        except ray.exceptions.RayActorError as exc:
            raise PoolUnavailable(_gone(exc)) from None
        self.mode, self.length_control = about["mode"], about["length_control"]
        self.grouper = _Grouping(about["scheme"])
        self.criterion_names: list[str] = about["criteria"]

    def rewards(self, prompts: Sequence[str], responses: Sequence[str | None],
                lengths: Sequence[int] | None = None) -> RewardBatch:
        import ray
        import ray.exceptions

        check_pairs(prompts, responses)
        try:
            answer = ray.get(self.pool.rewards.remote(*_args(prompts, responses, lengths)))
        except ray.exceptions.RayActorError as exc:
            raise PoolUnavailable(_gone(exc)) from None
        return _unpacked(answer)

    async def arewards(self, prompts: Sequence[str], responses: Sequence[str | None],
                       lengths: Sequence[int] | None = None) -> RewardBatch:
        import ray.exceptions

        check_pairs(prompts, responses)
        try:
            answer = await self.pool.rewards.remote(*_args(prompts, responses, lengths))
        except ray.exceptions.RayActorError as exc:
            raise PoolUnavailable(_gone(exc)) from None
        return _unpacked(answer)


def _args(prompts: Sequence[str], responses: Sequence[str | None],
          lengths: Sequence[int] | None) -> tuple[list[str], list[str | None], list[int] | None]:
    return list(prompts), list(responses), list(lengths) if lengths is not None else None


def _gone(exc: Exception) -> str:
    return f"the reward pool is gone ({one_line(str(exc))[:200]}): restart it"


def _unpacked(answer: tuple[str, Any, int]) -> RewardBatch:
    kind, value, _ = answer
    if kind == "ok":
        return value  # type: ignore[no-any-return]
    if kind == "error":
        raise value
    raise PoolUnavailable(f"{value}: the request was not rewarded, ask again once replicas are back")


def join_cluster(address: str | None = None, *, runtime_env: dict[str, Any] | None = None) -> None:
    """Join the Ray cluster at ``address`` (None: a local instance), unless this process already has;
    an address nothing answers at is one sentence (:mod:`veriscale.many.ray_cluster`)."""
    from veriscale.many.ray_cluster import join

    join(address, drop=setting("ray"), runtime_env=runtime_env)


def find_pool(name: str = POOL_NAME, namespace: str = POOL_NAMESPACE) -> Any | None:
    """The named reward pool of the Ray cluster this process is in; None when Ray is not initialized
    here or no such pool runs."""
    try:
        import ray
    except ImportError:
        return None
    if not ray.is_initialized():
        return None
    try:
        return ray.get_actor(name, namespace=namespace)
    except ValueError:
        return None


def reward_pool(replicas: int = 2, model: str | None = None, *, name: str | None = POOL_NAME,
                namespace: str = POOL_NAMESPACE, rewarder: BatchRewarder | None = None, mode: str | None = None,
                criteria: str | None = None, group_scheme: str | None = None, length_control: str | None = None,
                address: str | None = None, detached: bool = True, setup: Callable[[], None] | None = None,
                runtime_env: dict[str, Any] | None = None) -> Any:
    """The reward pool actor ``name`` (``None``: an unnamed one, this process's alone), started with
    ``replicas`` replicas of ``rewarder`` (else one built from ``model`` and the ``[rewards]`` settings,
    :func:`veriscale.rewards.configure.build_rewarder`) unless it already runs. ``detached``: it
    outlives this process (end it with ``ray.kill``)."""
    import ray

    if replicas < 1:
        raise UserError(f"{setting('replicas', replicas)} is below 1: give the number of reward replicas")
    join_cluster(address, runtime_env=runtime_env)
    if name is not None and (existing := find_pool(name, namespace)) is not None:
        return existing
    if rewarder is None:
        from veriscale.rewards.configure import build_rewarder

        rewarder = build_rewarder(model=model, mode=mode, criteria=criteria, group_scheme=group_scheme,
                                  length_control=length_control)
    options: dict[str, Any] = {"num_cpus": 0, "max_concurrency": 1000}
    if name is not None:
        options.update(name=name, namespace=namespace, get_if_exists=True)
    if detached:
        options["lifetime"] = "detached"
    pool: Any = ray.remote(RewardPool).options(**options).remote(replica_spec(rewarder, setup=setup), replicas)
    trouble = ray.get(pool.ready.remote())
    if trouble is not None:
        ray.kill(pool)
        raise UserError(f"the reward pool did not start: {trouble}")
    return pool
