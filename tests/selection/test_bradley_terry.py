"""Bradley–Terry fit over soft outcomes: recovery, symmetry, regularisation, confidence."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import spearmanr

from veriscale.errors import UserError
from veriscale.selection.core.bradley_terry import fit_bradley_terry, normalised_win_mass


def _simulated_outcomes(strengths, repeats, noise, seed):
    rng = np.random.default_rng(seed)
    outcomes = []
    for i, j in itertools.combinations(range(len(strengths)), 2):
        for r in range(repeats):
            a, b = (i, j) if r % 2 == 0 else (j, i)
            p = expit(strengths[a] - strengths[b]) + noise * rng.standard_normal()
            outcomes.append((a, b, float(np.clip(p, 0.0, 1.0))))
    return outcomes


def test_recovers_known_ranking_from_noisy_soft_outcomes():
    true = np.array([0.3, -1.2, 2.0, 0.9, -0.4, 1.5, -2.1, 0.0])
    fit = fit_bradley_terry(8, _simulated_outcomes(true, repeats=3, noise=0.05, seed=1))
    assert spearmanr(fit.strengths, true).statistic > 0.97
    assert fit.ranking[0] == 2
    assert fit.ranking[-1] == 6


def test_exact_outcomes_give_the_true_centred_strengths_with_a_tiny_prior():
    true = np.array([1.0, 0.0, -0.5, 2.0])
    outcomes = [(i, j, float(expit(true[i] - true[j]))) for i, j in itertools.permutations(range(4), 2)]
    fit = fit_bradley_terry(4, outcomes, prior=1e-6)
    np.testing.assert_allclose(fit.strengths, true - true.mean(), atol=1e-3)
    np.testing.assert_allclose(fit.win_probability, expit(true[:, None] - true[None, :]), atol=1e-3)


def test_symmetric_input_gives_equal_strengths_and_uniform_win_mass():
    outcomes = [(i, j, 0.5) for i, j in itertools.combinations(range(5), 2)]
    fit = fit_bradley_terry(5, outcomes)
    np.testing.assert_allclose(fit.strengths, 0.0, atol=1e-6)
    np.testing.assert_allclose(fit.win_mass, 0.2, atol=1e-6)
    cyclic = fit_bradley_terry(3, [(0, 1, 0.7), (1, 2, 0.7), (2, 0, 0.7)])
    np.testing.assert_allclose(cyclic.strengths, 0.0, atol=1e-6)


def test_confidence_is_near_one_over_n_for_indistinguishable_items():
    n = 4
    outcomes = [(i, j, 0.5) for i, j in itertools.combinations(range(n), 2) for _ in range(2)]
    fit = fit_bradley_terry(n, outcomes, n_samples=8000)
    assert abs(fit.confidence - 1 / n) < 0.04
    np.testing.assert_allclose(fit.prob_best, 1 / n, atol=0.04)


def test_confidence_is_high_for_a_clear_leader():
    true = np.array([3.0, 1.0, 0.5, 0.0, -1.0])
    fit = fit_bradley_terry(5, _simulated_outcomes(true, repeats=2, noise=0.02, seed=4))
    assert fit.leader == 0
    assert fit.confidence > 0.95


def test_confidence_drops_when_the_leader_is_barely_ahead():
    true = np.array([0.05, 0.0, -2.0])
    fit = fit_bradley_terry(3, _simulated_outcomes(true, repeats=2, noise=0.05, seed=2))
    assert fit.confidence < 0.8
    assert fit.prob_best[2] < 0.05


def test_disconnected_graph_fits_with_finite_centred_strengths():
    fit = fit_bradley_terry(4, [(0, 1, 0.9), (3, 2, 0.8)])
    assert np.all(np.isfinite(fit.strengths))
    assert abs(fit.strengths.sum()) < 1e-8
    assert fit.strengths[0] > fit.strengths[1]
    assert fit.strengths[3] > fit.strengths[2]
    assert abs(fit.prob_best.sum() - 1.0) < 1e-9
    # No evidence links the two components, so the fit cannot be sure either leader is best.
    assert fit.confidence < 0.75


def test_perfect_separation_stays_finite():
    fit = fit_bradley_terry(3, [(0, 1, 1.0), (1, 2, 1.0), (0, 2, 1.0)])
    assert np.all(np.isfinite(fit.strengths))
    assert fit.ranking == (0, 1, 2)
    assert fit.strengths.max() < 20


def test_items_without_outcomes_sit_at_zero():
    fit = fit_bradley_terry(3, [])
    np.testing.assert_allclose(fit.strengths, 0.0)
    assert fit.ranking == (0, 1, 2)


def test_weight_two_equals_a_duplicated_outcome_and_weight_zero_drops_it():
    base = [(0, 1, 0.8), (1, 2, 0.6), (0, 2, 0.3)]
    doubled = fit_bradley_terry(3, base + [base[0]], dispersion=1.0)
    weighted = fit_bradley_terry(3, base, weights=[2.0, 1.0, 1.0], dispersion=1.0)
    np.testing.assert_allclose(doubled.strengths, weighted.strengths, atol=1e-5)
    dropped = fit_bradley_terry(3, base[1:], dispersion=1.0)
    zeroed = fit_bradley_terry(3, base, weights=[0.0, 1.0, 1.0], dispersion=1.0)
    np.testing.assert_allclose(dropped.strengths, zeroed.strengths, atol=1e-5)


def test_win_mass_sums_to_one_and_follows_strength_order():
    theta = np.array([0.4, -1.0, 2.2, 0.0])
    mass = normalised_win_mass(theta)
    assert abs(mass.sum() - 1.0) < 1e-12
    assert list(np.argsort(-mass)) == list(np.argsort(-theta))


def test_same_seed_same_confidence_and_seed_changes_sampling_only():
    outcomes = [(0, 1, 0.6), (1, 2, 0.55), (0, 2, 0.6)]
    a = fit_bradley_terry(3, outcomes, seed=5)
    b = fit_bradley_terry(3, outcomes, seed=5)
    c = fit_bradley_terry(3, outcomes, seed=6)
    np.testing.assert_array_equal(a.prob_best, b.prob_best)
    np.testing.assert_array_equal(a.strengths, c.strengths)


@pytest.mark.parametrize(
    "n_items, outcomes, kwargs",
    [
        (0, [], {}),
        (2, [(0, 1, 1.2)], {}),
        (2, [(0, 0, 0.5)], {}),
        (2, [(0, 2, 0.5)], {}),
        (2, [(0, 1)], {}),
        (2, [(0, 1, 0.5)], {"prior": 0.0}),
        (2, [(0, 1, 0.5)], {"weights": [1.0, 1.0]}),
        (2, [(0, 1, 0.5)], {"weights": [-1.0]}),
    ],
)
def test_bad_input_raises_user_error(n_items, outcomes, kwargs):
    with pytest.raises(UserError):
        fit_bradley_terry(n_items, outcomes, **kwargs)


def test_a_fit_runs_blas_on_one_thread_and_gives_the_process_its_setting_back() -> None:
    """The fit's one-thread BLAS limit is its own: fits in four threads at once leave BLAS at the
    thread count it had, and inside a fit BLAS runs on one thread."""
    import threading

    from threadpoolctl import threadpool_info

    from veriscale.selection.core import bradley_terry

    outcomes = [(i, j, 0.3 + 0.05 * (i + j)) for i in range(6) for j in range(i + 1, 6)]
    fit_bradley_terry(6, outcomes)  # scipy's BLAS is loaded from here on
    before = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
    with bradley_terry._one_blas_thread():
        inside = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
    workers = [threading.Thread(target=lambda: [fit_bradley_terry(6, outcomes) for _ in range(10)]) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    after = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
    assert inside and set(inside) == {1}
    assert after == before
