"""The temperature tau in P(a beats b) = sigmoid((R_a - R_b) / tau), per model.

tau is fitted by maximum likelihood on labelled dev pairs (``veriscale calibrate``, or
``benchmarks/calibrate_tau.py``) and stored in the store's meta table under the model's
fingerprint; without a fit, ``DEFAULT_TAU`` is used and the result carries that tau.

    tau = fit_tau(diffs=[0.1, -0.05, ...], a_wins=[True, False, ...])
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize_scalar

DEFAULT_TAU = 0.1  # a reward gap of 0.1 (two letter grades on G=20) gives P = 0.73
_OVERRIDES: dict[str, float] = {}


def tau_key(fingerprint: str, scale: str, discrete: bool) -> str:
    return f"tau:{fingerprint}:{scale}:{'discrete' if discrete else 'continuous'}"


def set_tau(fingerprint: str, scale: str, discrete: bool, tau: float) -> None:
    _OVERRIDES[tau_key(fingerprint, scale, discrete)] = tau


def tau_for(fingerprint: str, scale: str, discrete: bool) -> float:
    return _OVERRIDES.get(tau_key(fingerprint, scale, discrete), DEFAULT_TAU)


def fit_tau(diffs: list[float], a_wins: list[bool], lo: float = 0.005, hi: float = 2.0) -> float:
    """MLE of tau for P(a wins) = sigmoid(diff / tau) over labelled pairs (bounded search)."""
    d = np.asarray(diffs, dtype=float)
    y = np.asarray(a_wins, dtype=float)
    if len(d) == 0 or not np.any(d != 0):
        return DEFAULT_TAU

    def nll(log_tau: float) -> float:
        z = d / math.exp(log_tau)
        return float(np.sum(np.logaddexp(0, -z) * y + np.logaddexp(0, z) * (1 - y)))

    res = minimize_scalar(nll, bounds=(math.log(lo), math.log(hi)), method="bounded")
    return float(math.exp(res.x))
