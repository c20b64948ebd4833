"""Progress shaping for multi-step episodes: r_t = r_env,t + λ · (v_t − v_{t−1}).

``v_t`` is the progress the online tracker (:class:`veriscale.progress.ProgressTracker`) gives
the episode after step t, with v_0 = 0 (nothing done before the first step). The shaping terms
telescope: summed over an episode they add λ · v_T, so they reward steps that make progress
without changing which complete episodes are best by more than λ::

    shaped_rewards([0, 0, 1], [0.2, 0.5, 0.9], lam=0.5)   # [0.1, 0.15, 1.2]
    shaper = ProgressShaper(ProgressTracker(task), lam=0.5)
    shaper.step(step, env_reward=0.0)                      # one shaped reward per step, online

A step whose progress could not be scored adds no shaping (its v is carried over), so a failed
verification never pushes a reward up or down.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from veriscale.errors import UserError


def shaped_rewards(env_rewards: Sequence[float], progress: Sequence[float | None], lam: float,
                   start: float = 0.0) -> list[float]:
    """Per-step rewards with the progress term; ``progress[t]`` is v after step t (None: unscored)."""
    if len(env_rewards) != len(progress):
        raise UserError(f"{len(env_rewards)} environment rewards but {len(progress)} progress values: "
                        "give one of each per step")
    shaped, before = [], start
    for reward, value in zip(env_rewards, progress):
        now = before if value is None else value
        shaped.append(float(reward) + lam * (now - before))
        before = now
    return shaped


class ProgressShaper:
    """Online shaping: feed each step with its environment reward, get the shaped reward."""

    def __init__(self, tracker: Any, lam: float) -> None:
        if not isinstance(lam, (int, float)) or lam < 0:
            raise UserError(f"lambda {lam!r} must be a number >= 0: the weight of the progress term")
        self.tracker, self.lam, self._before = tracker, float(lam), 0.0

    def _shape(self, value: float | None, env_reward: float) -> float:
        now = self._before if value is None else value
        reward, self._before = float(env_reward) + self.lam * (now - self._before), now
        return reward

    def step(self, step: Any, env_reward: float = 0.0) -> float:
        return self._shape(self.tracker.update(step).value, env_reward)

    async def astep(self, step: Any, env_reward: float = 0.0) -> float:
        return self._shape((await self.tracker.aupdate(step)).value, env_reward)
