"""Percentile-bootstrap confidence intervals for a mean over tasks (seeded, ``scipy.stats.bootstrap``).

    est = bootstrap_mean([0.5, 0.7, 0.9], seed=0)        # Estimate(mean=0.7, low=..., high=..., n=3)
    est = bootstrap_mean(final - single, seed=0)           # paired difference: pass the differences

Tasks are resampled with replacement ``n_resamples`` times; the interval is the
``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` percentiles of the resampled means. The
same ``seed`` and values always give the same interval. One value gives a zero-width interval;
no values give ``None``.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from veriscale.errors import UserError, setting


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
        raise UserError(f"bootstrap resamples must be at least 1, got {n_resamples}: set {setting('n_resamples')} to e.g. 2000")
    if not 0 < confidence < 1:
        raise UserError(f"confidence must be between 0 and 1, got {confidence}: pass e.g. 0.95")
    data = np.asarray(list(values), dtype=float)
    if data.size == 0:
        return None
    mean = float(data.mean())
    if data.size == 1:
        return Estimate(mean=mean, low=mean, high=mean, n=1)
    from scipy import stats  # scipy only where an interval is computed

    # scipy draws the same resamples from the same seeded generator as a hand-written
    # ``rng.integers(0, n, (n_resamples, n))`` would, and takes numpy's linear percentiles.
    # (Its standard error, unused here, is undefined for one resample: its warnings are muted.)
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        result = stats.bootstrap((data,), np.mean, n_resamples=n_resamples, confidence_level=confidence,
                                 method="percentile", rng=np.random.default_rng(seed), vectorized=True)
    low, high = result.confidence_interval
    return Estimate(mean=mean, low=float(low), high=float(high), n=int(data.size))
