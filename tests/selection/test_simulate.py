"""The simulated judge: repeatable answers, known preference, slot bias toward slot A."""

from __future__ import annotations

import pytest

from veriscale.errors import UserError
from tests.support.selection_sim import NoisyPreferenceOracle


def test_same_judgement_gives_the_same_answer_and_counts_calls():
    oracle = NoisyPreferenceOracle([0.0, 0.2, 0.1], noise=0.05, seed=3)
    assert oracle(0, 1, 0) == oracle(0, 1, 0)
    assert oracle(0, 1, 0) != oracle(0, 1, 1)
    assert oracle.calls == 4
    assert oracle.best == 1


def test_noise_free_answer_is_the_true_preference_and_bias_favours_slot_a():
    oracle = NoisyPreferenceOracle([0.0, 0.0], noise=0.0, slot_bias=0.1)
    assert oracle.true_preference(0, 1) == 0.5
    assert oracle(0, 1, 0) == pytest.approx(0.6)  # 0 in slot A
    assert oracle(0, 1, 1) == pytest.approx(0.4)  # 1 in slot A


def test_answers_stay_probabilities_under_heavy_noise():
    oracle = NoisyPreferenceOracle([3.0, -3.0], noise=2.0, seed=1)
    assert all(0.0 <= oracle(0, 1, r) <= 1.0 for r in range(50))


@pytest.mark.parametrize(
    "kwargs",
    [{"qualities": []}, {"qualities": [0.0], "temperature": 0.0}, {"qualities": [0.0], "noise": -1.0}],
)
def test_bad_settings_raise_user_error(kwargs):
    with pytest.raises(UserError):
        NoisyPreferenceOracle(**kwargs)
