"""Bradley–Terry fit over soft pairwise outcomes, with a confidence that the top item is best.

Each outcome says how likely item ``i`` beats item ``j``: ``p = P(i ≻ j)`` in [0, 1]. A pair may
be compared several times, in either orientation, and each outcome may carry a weight. The
model is ``P(i ≻ j) = σ(θ_i − θ_j)``; the fit maximises the weighted soft log-likelihood plus an
L2 prior ``(prior/2)·‖θ‖²`` (a zero-mean Gaussian on log-strengths), so a disconnected
comparison graph still fits and outcomes of exactly 0 or 1 keep strengths finite::

    fit = fit_bradley_terry(3, [(0, 1, 0.9), (1, 2, 0.7), (2, 0, 0.2)])
    fit.ranking        # (0, 1, 2)
    fit.win_mass       # normalised win mass, sums to 1
    fit.confidence     # P(ranking[0] is truly the best) under the Laplace posterior

Confidence (Laplace approximation): ``θ ~ N(θ̂, H⁻¹)`` with ``H`` the Hessian of the negative
log-posterior at the optimum; ``prob_best[i]`` is the fraction of seeded samples in which item
``i`` has the largest strength. Each outcome counts as one Bernoulli-equivalent observation
times its weight, so a single soft judgement moves the posterior only a little; raise the
weights if your judge's probabilities deserve more trust.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np

from veriscale.errors import UserError

DEFAULT_PRIOR = 0.1
DEFAULT_SAMPLES = 4000
DISPERSION_PRIOR_DOF = 4.0

Outcome = tuple[int, int, float]
"""``(i, j, p)``: one judgement that item ``i`` beats item ``j`` with probability ``p``."""


@dataclass(frozen=True)
class BradleyTerryFit:
    """Fitted strengths and what follows from them; arrays are indexed by item.

    ``strengths``: log-scale, centred to mean 0. ``win_probability[i, j] = σ(θ_i − θ_j)``
    (diagonal 0.5). ``win_mass``: for each i the mean over j ≠ i of ``σ(θ_i − θ_j)``, scaled to
    sum 1. ``ranking``: items best first (ties broken by lower index). ``prob_best[i]``: posterior
    probability that item i is the strongest. ``confidence = prob_best[ranking[0]]``.
    ``covariance``: the Laplace posterior covariance ``H⁻¹``.
    """

    strengths: np.ndarray
    win_probability: np.ndarray
    win_mass: np.ndarray
    ranking: tuple[int, ...]
    prob_best: np.ndarray
    confidence: float
    covariance: np.ndarray
    dispersion: float

    @property
    def leader(self) -> int:
        """The item ranked first."""
        return self.ranking[0]


def normalised_win_mass(strengths: Sequence[float] | np.ndarray) -> np.ndarray:
    """For each item, mean over the others of ``σ(θ_i − θ_j)``, scaled so the masses sum to 1."""
    from scipy.special import expit  # scipy is imported where a fit runs, not with the package

    theta = np.asarray(strengths, dtype=float)
    n = theta.size
    if n == 1:
        return np.ones(1)
    mean_win = (expit(theta[:, None] - theta[None, :]).sum(axis=1) - 0.5) / (n - 1)
    normalised: np.ndarray = mean_win / mean_win.sum()
    return normalised


def ranking_by(values: Sequence[float] | np.ndarray) -> tuple[int, ...]:
    """Indices sorted by value, largest first; equal values keep index order."""
    vals = np.asarray(values, dtype=float)
    return tuple(int(i) for i in sorted(range(vals.size), key=lambda i: (-vals[i], i)))


def fit_bradley_terry(
    n_items: int,
    outcomes: Sequence[Outcome],
    weights: Sequence[float] | None = None,
    *,
    prior: float = DEFAULT_PRIOR,
    n_samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
    dispersion: float | None = None,
) -> BradleyTerryFit:
    """Fit Bradley–Terry strengths to soft outcomes ``(i, j, p)`` by L-BFGS with an exact gradient.

    ``weights`` (same length as ``outcomes``, each ≥ 0) scale each outcome's log-likelihood.
    ``prior`` > 0 is the L2 penalty on strengths. ``n_samples`` posterior draws from a
    ``numpy`` generator seeded with ``seed`` give ``prob_best``; same inputs, same result.
    """
    if not isinstance(n_items, (int, np.integer)) or n_items < 1:
        raise UserError(f"n_items={n_items!r} is not a positive integer: pass how many items were compared")
    if not prior > 0 or not np.isfinite(prior):
        raise UserError(f"prior={prior!r} must be a positive finite number: pass e.g. {DEFAULT_PRIOR}")
    if dispersion is not None and not (np.isfinite(dispersion) and dispersion > 0):
        raise UserError(f"dispersion={dispersion!r} must be a positive number, or None to estimate it")
    if n_samples < 1:
        raise UserError(f"n_samples={n_samples!r} must be at least 1: pass e.g. {DEFAULT_SAMPLES}")
    from scipy.optimize import minimize
    from scipy.special import expit

    first, second, prob, weight = _validated_arrays(n_items, outcomes, weights)

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        diff = theta[first] - theta[second]
        # -[p·log σ(d) + (1-p)·log σ(-d)], written with logaddexp for stability.
        nll = weight * (prob * np.logaddexp(0.0, -diff) + (1.0 - prob) * np.logaddexp(0.0, diff))
        residual = weight * (expit(diff) - prob)
        grad = prior * theta + np.bincount(first, residual, n_items) - np.bincount(second, residual, n_items)
        return float(nll.sum() + 0.5 * prior * theta @ theta), grad

    theta0 = np.zeros(n_items)
    if first.size:
        with _one_blas_thread():
            solution = minimize(
                objective, theta0, jac=True, method="L-BFGS-B", options={"gtol": 1e-10, "ftol": 1e-14, "maxiter": 2000}
            )
        theta = solution.x
    else:
        theta = theta0
    theta = theta - theta.mean()

    phi = _dispersion(n_items, first, second, prob, weight, theta) if dispersion is None else float(dispersion)
    precision = prior * np.eye(n_items)
    if first.size:
        diff = theta[first] - theta[second]
        curvature = weight * expit(diff) * expit(-diff) / phi
        np.add.at(precision, (first, first), curvature)
        np.add.at(precision, (second, second), curvature)
        np.add.at(precision, (first, second), -curvature)
        np.add.at(precision, (second, first), -curvature)
    covariance = np.linalg.inv(precision)
    covariance = 0.5 * (covariance + covariance.T)

    prob_best = _prob_best(theta, covariance, n_samples, seed)
    win_mass = normalised_win_mass(theta)
    ranking = ranking_by(theta)
    win_probability = expit(theta[:, None] - theta[None, :])
    return BradleyTerryFit(
        strengths=theta,
        win_probability=win_probability,
        win_mass=win_mass,
        ranking=ranking,
        prob_best=prob_best,
        confidence=float(prob_best[ranking[0]]),
        covariance=covariance,
        dispersion=phi,
    )


_BLAS_LOCK = threading.Lock()
_BLAS: dict[str, Any] = {"controller": None, "users": 0, "limit": None}


@contextmanager
def _one_blas_thread() -> Iterator[None]:
    """BLAS on one thread for the fit. L-BFGS-B's BLAS calls are on vectors of n strengths, far
    too small to share: with OpenBLAS's threads the fit took 20–35 ms on a loaded 2-core machine
    against 2–5 ms on one (benchmarks/bench_bt_threads.py). Fits in several threads at once share
    one limit: the first sets it, the last restores BLAS's own setting."""
    with _BLAS_LOCK:
        if _BLAS["controller"] is None:  # found once, after scipy's BLAS is loaded
            from threadpoolctl import ThreadpoolController

            _BLAS["controller"] = ThreadpoolController()
        if _BLAS["users"] == 0:
            _BLAS["limit"] = _BLAS["controller"].limit(limits=1, user_api="blas")
        _BLAS["users"] += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _BLAS["users"] -= 1
            if _BLAS["users"] == 0:
                _BLAS["limit"].restore_original_limits()
                _BLAS["limit"] = None


def _validated_arrays(
    n_items: int, outcomes: Sequence[Outcome], weights: Sequence[float] | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Check outcomes and weights; return index, probability and weight arrays."""
    first, second, prob = [], [], []
    for position, outcome in enumerate(outcomes):
        try:
            i, j, p = outcome
        except (TypeError, ValueError):
            raise UserError(f"outcome #{position} is {outcome!r}: give each outcome as (i, j, p)") from None
        for index in (i, j):
            if not isinstance(index, (int, np.integer)) or not 0 <= index < n_items:
                raise UserError(
                    f"outcome #{position} names item {index!r}: item indices must be integers in 0..{n_items - 1}"
                )
        if i == j:
            raise UserError(f"outcome #{position} compares item {i} with itself: compare two different items")
        if not isinstance(p, (int, float, np.floating, np.integer)) or not 0.0 <= float(p) <= 1.0:
            raise UserError(f"outcome #{position} has p={p!r}: p = P(i beats j) must be a number in [0, 1]")
        first.append(int(i))
        second.append(int(j))
        prob.append(float(p))
    if weights is None:
        weight = np.ones(len(prob))
    else:
        weight = np.asarray(list(weights), dtype=float)
        if weight.shape != (len(prob),):
            raise UserError(f"got {weight.size} weights for {len(prob)} outcomes: pass one weight per outcome")
        if not np.all(np.isfinite(weight)) or np.any(weight < 0):
            raise UserError("weights must be finite and non-negative: fix the negative or missing weight")
    return np.asarray(first, dtype=int), np.asarray(second, dtype=int), np.asarray(prob), weight


def _dispersion(
    n_items: int, first: np.ndarray, second: np.ndarray, prob: np.ndarray, weight: np.ndarray, theta: np.ndarray
) -> float:
    """Quasi-binomial dispersion: Pearson χ² per residual degree of freedom, shrunk toward 1."""
    if first.size == 0:
        return 1.0
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    from scipy.special import expit

    fitted = expit(theta[first] - theta[second])
    pearson = float(np.sum(weight * (prob - fitted) ** 2 / (fitted * (1.0 - fitted))))
    graph = coo_matrix((np.ones(first.size), (first, second)), shape=(n_items, n_items))
    components, _ = connected_components(graph, directed=False)
    residual_dof = max(float(weight.sum()) - (n_items - components), 0.0)
    return float((pearson + DISPERSION_PRIOR_DOF) / (residual_dof + DISPERSION_PRIOR_DOF))


def _prob_best(theta: np.ndarray, covariance: np.ndarray, n_samples: int, seed: int) -> np.ndarray:
    """Fraction of posterior draws in which each item has the largest strength."""
    n = theta.size
    if n == 1:
        return np.ones(1)
    rng = np.random.default_rng(seed)
    # Cholesky of a symmetric positive-definite covariance; eigen fallback guards rounding.
    try:
        factor = np.linalg.cholesky(covariance)
    except np.linalg.LinAlgError:
        values, vectors = np.linalg.eigh(covariance)
        factor = vectors * np.sqrt(np.clip(values, 0.0, None))
    draws = theta + rng.standard_normal((n_samples, n)) @ factor.T
    counts = np.bincount(np.argmax(draws, axis=1), minlength=n)
    return counts / n_samples
