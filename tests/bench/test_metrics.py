"""Bench metrics on hand-made numbers: pairwise accuracy, ties, SNR; pass@1, oracle, random, selected."""

from __future__ import annotations

import math

import pytest

from veriscale.bench.metrics import PairOutcome, PoolOutcome, pairwise_metrics, pool_metrics
from veriscale.errors import UserError


def test_pairwise_accuracy_ties_and_snr():
    outcomes = [
        PairOutcome(0.8, 0.6, 0.88, 1),  # right, margin +0.2
        PairOutcome(0.4, 0.7, 0.05, 2),  # right, margin +0.3
        PairOutcome(0.5, 0.5, 0.50, 1),  # exact tie, margin 0
        PairOutcome(0.6, 0.5, 0.73, 2),  # wrong, margin -0.1
    ]
    m = pairwise_metrics(outcomes, failed=1)
    assert m.n == 4 and m.failed == 1
    assert m.accuracy == pytest.approx((2 + 0.5) / 4)
    assert m.strict_accuracy == pytest.approx(2 / 4)
    assert m.tie_rate == pytest.approx(1 / 4)
    assert m.mean_margin == pytest.approx(0.1)
    std = math.sqrt((0.1**2 + 0.2**2 + 0.1**2 + 0.2**2) / 4)
    assert m.std_margin == pytest.approx(std)
    assert m.snr == pytest.approx(0.1 / std)


def test_a_preference_within_001_of_half_is_a_tie_even_with_unequal_rewards():
    m = pairwise_metrics([PairOutcome(0.51, 0.50, 0.505, 1), PairOutcome(0.9, 0.1, 0.99, 1)])
    assert m.tie_rate == 0.5 and m.strict_accuracy == 0.5 and m.accuracy == 0.75


def test_snr_needs_spread_and_two_pairs():
    assert pairwise_metrics([PairOutcome(0.9, 0.1, 0.99, 1)]).snr is None
    assert pairwise_metrics([PairOutcome(0.9, 0.1, 0.99, 1)] * 3).snr is None
    assert pairwise_metrics([]).accuracy is None


def test_bad_pair_label_is_refused():
    with pytest.raises(UserError, match="1 or 2"):
        pairwise_metrics([PairOutcome(0.5, 0.4, 0.7, 0)])


def test_pool_pass_at_1_oracle_random_and_selected():
    outcomes = [
        PoolOutcome("t1", [1, 0, 0, 1], selected=0, random_pick=1, comparisons=7, model_calls=42, prompt_tokens=900),
        PoolOutcome("t2", [0, 0, 1], selected=1, random_pick=2, comparisons=4, model_calls=24, prompt_tokens=500),
        PoolOutcome("t3", [0, 0], selected=0, random_pick=0, comparisons=2, model_calls=12, prompt_tokens=100),
        PoolOutcome("t4", [1, 0], selected=None, random_pick=0, model_calls=6),  # selection failed
    ]
    m = pool_metrics(outcomes)
    assert m.n_tasks == 3 and m.failed == 1
    assert m.pass_at_1 == pytest.approx((0.5 + 1 / 3 + 0.0) / 3)
    assert m.oracle == pytest.approx(2 / 3)
    assert m.random_pick == pytest.approx(1 / 3)
    assert m.selected == pytest.approx(1 / 3)
    assert (m.comparisons, m.model_calls, m.prompt_tokens) == (13, 84, 1500)
    assert m.per_task[3]["selected_label"] is None and m.per_task[0]["selected_label"] == 1


def test_pass_at_1_is_a_per_task_mean_not_a_per_run_mean():
    m = pool_metrics([PoolOutcome("big", [1] * 9 + [0], 0, 0), PoolOutcome("small", [0, 0], 0, 0)])
    assert m.pass_at_1 == pytest.approx((0.9 + 0.0) / 2)


def test_all_failed_gives_no_rates():
    m = pool_metrics([PoolOutcome("t", [1, 0], None, 0)])
    assert m.n_tasks == 0 and m.selected is None and m.failed == 1
