"""Percentile-bootstrap confidence intervals for a mean over tasks (seeded, numpy).

    est = bootstrap_mean([0.5, 0.7, 0.9], seed=0)        # Estimate(mean=0.7, low=..., high=..., n=3)
    est = bootstrap_mean(final - single, seed=0)           # paired difference: pass the differences

Tasks are resampled with replacement ``n_resamples`` times; the interval is the
``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` percentiles of the resampled means. The
same ``seed`` and values always give the same interval. One value gives a zero-width interval;
no values give ``None``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from veriscale.errors import UserError


@dataclass(frozen=True)
class Estimate:
    """A mean with its bootstrap interval over ``n`` tasks."""

    mean: float
    low: float
    high: float
    n: int

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def bootstrap_mean(
    values: Sequence[float],
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> Estimate | None:
    """Mean of ``values`` with a seeded percentile-bootstrap interval; ``None`` when empty."""
    if n_resamples < 1:
        raise UserError(f"bootstrap resamples must be at least 1, got {n_resamples}: pass e.g. --bootstrap 2000")
    if not 0 < confidence < 1:
        raise UserError(f"confidence must be between 0 and 1, got {confidence}: pass e.g. 0.95")
    data = np.asarray(list(values), dtype=float)
    if data.size == 0:
        return None
    mean = float(data.mean())
    if data.size == 1:
        return Estimate(mean=mean, low=mean, high=mean, n=1)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, data.size, size=(n_resamples, data.size))
    means = data[picks].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return Estimate(mean=mean, low=float(low), high=float(high), n=int(data.size))
