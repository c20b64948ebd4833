"""veRL reward functions that send their work to a Ray reward pool when one runs in veRL's cluster.

Start the pool in the cluster veRL joins, then point veRL at this module (veRL 0.9)::

    python -c "from veriscale.rewards.ray_pool import reward_pool; \\
               reward_pool(replicas=4, model='http://10.0.0.7:8000/v1#judge', address='auto')"
    python -m verl.trainer.main_ppo ... \\
      reward.custom_reward_function.path=pkg://veriscale.rewards.verl_ray \\
      reward.custom_reward_function.name=compute_score_async

The functions are :mod:`veriscale.rewards.verl`'s, in veRL's calling conventions and with the same
dicts, options and failure rule. Where veRL's reward workers run, each process looks the pool up
by name (``veriscale-rewards`` in the ``veriscale`` namespace, :func:`~veriscale.rewards.ray_pool.find_pool`)
and sends each response there; with no pool in the cluster (or outside Ray) it rewards with the
process-local verifier of :func:`veriscale.rewards.verl.compute_score`. A pool of another name:
``compute_score = make_compute_score(PoolRewarder(find_pool("mine"))).compute_score_async``.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from veriscale.rewards.ray_pool import POOL_NAME, POOL_NAMESPACE, PoolRewarder, PoolUnavailable, find_pool
from veriscale.rewards.verl import VerlScorer, _default

LOOK_AGAIN_S = 30.0  # with no pool found, how long this process rewards locally before it looks again

_lock = threading.Lock()
_pooled: VerlScorer | None = None
_looked_at = -LOOK_AGAIN_S


def scorer() -> VerlScorer:
    """The pool's scorer when the named pool runs in this process's Ray cluster, else the local one."""
    global _pooled, _looked_at
    with _lock:
        if _pooled is None and time.monotonic() - _looked_at >= LOOK_AGAIN_S:
            _looked_at = time.monotonic()
            pool = find_pool(POOL_NAME, POOL_NAMESPACE)
            if pool is not None:
                _pooled = VerlScorer(PoolRewarder(pool))
        if _pooled is not None:
            return _pooled
    return _default()


def _forget() -> None:
    """The pool went: look it up again on the next call."""
    global _pooled, _looked_at
    with _lock:
        _pooled, _looked_at = None, -LOOK_AGAIN_S


def compute_score(data_source: Any = None, solution_str: Any = None, ground_truth: Any = None,
                  extra_info: Any = None, **kwargs: Any) -> dict[str, float]:
    """One response's reward dict, pointwise, from the pool (or the local verifier)."""
    try:
        return scorer().compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)
    except PoolUnavailable:
        _forget()
        raise


async def compute_score_async(data_source: Any = None, solution_str: Any = None, ground_truth: Any = None,
                              extra_info: Any = None, **kwargs: Any) -> dict[str, float]:
    """:func:`compute_score` as a coroutine function, which veRL's reward loop awaits."""
    try:
        return await scorer().compute_score_async(data_source, solution_str, ground_truth, extra_info, **kwargs)
    except PoolUnavailable:
        _forget()
        raise


def compute_score_batch(data_sources: Any = None, solution_strs: Any = None, ground_truths: Any = None,
                        extra_infos: Any = None, **kwargs: Any) -> list[dict[str, float]]:
    """Group-relative reward dicts for BatchRewardManager, from the pool (or the local verifier)."""
    try:
        return scorer().compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, **kwargs)
    except PoolUnavailable:
        _forget()
        raise


__all__ = ["compute_score", "compute_score_async", "compute_score_batch", "scorer"]
