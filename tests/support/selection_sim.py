"""A simulated judge with known candidate qualities, for tests and benchmarks (no model calls).

``judge(i, j, repeat)`` returns ``σ((q_i − q_j)/τ) + ε`` clipped to [0, 1], where ``ε`` is
Gaussian with standard deviation ``noise`` plus, if ``slot_bias`` is set, ``+slot_bias`` toward
whichever candidate sits in slot A (``i`` when ``repeat`` is even). The noise of each
``(i, j, repeat)`` is drawn from a generator seeded by ``(seed, i, j, repeat)``, so asking again
returns the same answer, like a cached model::

    oracle = NoisyPreferenceOracle([0.0, 1.0, 2.0], temperature=0.5, noise=0.1, seed=3)
    ppt(3, oracle, k=1).winner    # 2 (almost always)
    oracle.calls                  # judge calls made so far
    kendall_tau(result.strengths, oracle.qualities)   # 1.0: the order is the true one
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from veriscale.errors import UserError
from veriscale.verify.reward import sigmoid
from veriscale.verify.repeats import repeat as repeat_computation


class NoisyPreferenceOracle:
    """Judge with true qualities ``qualities``; ``best`` is the index of the highest quality."""

    def __init__(
        self,
        qualities: Sequence[float],
        *,
        temperature: float = 0.5,
        noise: float = 0.1,
        slot_bias: float = 0.0,
        seed: int = 0,
    ) -> None:
        self.qualities = np.asarray(list(qualities), dtype=float)
        if self.qualities.ndim != 1 or self.qualities.size == 0 or not np.all(np.isfinite(self.qualities)):
            raise UserError("qualities must be a non-empty list of finite numbers, one per candidate")
        if not temperature > 0:
            raise UserError(f"temperature={temperature!r} must be positive: e.g. 0.5")
        if not noise >= 0:
            raise UserError(f"noise={noise!r} must be >= 0: it is the standard deviation added to P(i beats j)")
        self.temperature = float(temperature)
        self.noise = float(noise)
        self.slot_bias = float(slot_bias)
        self.seed = int(seed)
        self.calls = 0

    @property
    def best(self) -> int:
        """Index of the truly best candidate (lowest index on equal quality)."""
        return int(np.argmax(self.qualities))

    def true_preference(self, i: int, j: int) -> float:
        """Noise-free ``P(i ≻ j)``."""
        return sigmoid((self.qualities[i] - self.qualities[j]) / self.temperature)

    def __call__(self, i: int, j: int, repeat: int) -> float:
        """Noisy ``P(i ≻ j)`` for this judgement; ``i`` is in slot A when ``repeat`` is even."""
        self.calls += 1
        rng = np.random.default_rng([self.seed, int(i), int(j), int(repeat)])
        i_first = repeat_computation(repeat, pairwise=True, reasoning=False).order == "AB"
        bias = self.slot_bias if i_first else -self.slot_bias
        p = self.true_preference(i, j) + bias + self.noise * rng.standard_normal()
        return float(np.clip(p, 0.0, 1.0))


def random_qualities(n: int, seed: int, spread: float = 1.0) -> np.ndarray:
    """``n`` qualities drawn i.i.d. from N(0, spread²) with a seeded generator."""
    return np.random.default_rng(seed).normal(0.0, spread, size=n)


def kendall_tau(scores: Sequence[float], qualities: Sequence[float]) -> float:
    """Kendall τ-b of an order (``scores``, higher = better) against the true ``qualities``: 1 = same order."""
    from scipy.stats import kendalltau  # scipy only where a tau is asked for (import veriscale stays light)

    tau = kendalltau(np.asarray(scores, dtype=float), np.asarray(qualities, dtype=float)).statistic
    return 0.0 if not np.isfinite(tau) else float(tau)
