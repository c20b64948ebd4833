"""Rewards at the trainers' edges, in TRL's and veRL's calling conventions: completions longer than
the judge's context, groups of one marked pointwise, the reward–length correlation and the
length-controlled reward. The judge is the real embedded model where the behaviour is about it
(its context), else the graded test double (more '+' marks, a better label)."""

from __future__ import annotations

import math
import random

import pytest

from tests.rewards.test_group_and_shaping import GradedModel
from veriscale.models.context import ContextOverflow
from veriscale.rewards import BatchRewarder, TRLReward
from veriscale.rewards.length import LengthControl, correlation
from veriscale.rewards.verl import make_compute_score
from veriscale.verify.criteria import load_criteria
from veriscale.verify.reward import Verifier

ONE = load_criteria("general").only(["Correctness"])
TASK = "Compute 17 * 23 and show the steps."


class OverflowingModel(GradedModel):
    """TEST DOUBLE: a judge whose context a completion marked OVERFLOW never fits, at any rendering."""

    def score(self, request):
        if "OVERFLOW" in self._slot_text(request):
            self.calls.append(request)
            raise ContextOverflow("the prompt is 12861 tokens, more than the model's context of 8192", context=8192)
        return super().score(request)


@pytest.mark.embedded
def test_a_completion_longer_than_the_embedded_context_is_scored_in_pointwise_mode(embedded_model) -> None:
    """Before: 'the prompt is 12861 tokens, more than the embedded model's context' ended TRL's call."""
    long = "17 * 23 = 391, because 17 * 20 = 340 and 17 * 3 = 51. " + "Checking once more: 340 + 51 = 391. " * 1500
    assert embedded_model.count_tokens(long) > embedded_model.context_size()
    reward = TRLReward(Verifier(embedded_model, scale="letters:5", criteria=ONE), mode="pointwise")
    metrics: dict = {}
    rewards = reward(prompts=[TASK, TASK], completions=[long, "391"], completion_ids=[[0] * 12000, [0]],
                     trainer_state=None, log_metric=metrics.__setitem__)
    assert all(r is not None and 0.0 < r < 1.0 for r in rewards)
    assert metrics["veriscale/failed"] == 0 and metrics["veriscale/pointwise"] == 2


def test_a_completion_that_cannot_fit_is_not_scored_alone_and_the_call_goes_on() -> None:
    model = OverflowingModel()
    completions = ["391 + +", "OVERFLOW " * 50, "381"]
    rewards = TRLReward(Verifier(model, scale="letters:5", criteria=ONE), mode="pointwise")(
        prompts=[TASK] * 3, completions=completions)
    assert rewards[1] is None  # TRL takes None as "not scored" (NaN, left out of the loss)
    assert rewards[0] > rewards[2] and rewards[2] is not None
    batch = BatchRewarder(Verifier(model, scale="letters:5", criteria=ONE), mode="pointwise").rewards([TASK] * 3, completions)
    assert batch.unverified == [False, True, False]
    assert any("completion 0 not scored" in e and "12861 tokens" in e for e in batch.errors)
    assert batch.neutral_filled().rewards[1] == pytest.approx((rewards[0] + rewards[2]) / 2)  # OpenRLHF/veRL neutral


def test_a_group_of_one_is_marked_pointwise_for_each_trainer() -> None:
    verifier = Verifier(GradedModel(), scale="letters:5", criteria=ONE)
    extra: dict = {}
    TRLReward(verifier)(prompts=[TASK, TASK, "Name the capital of France."], completions=["391 +", "381", "Paris +"],
                        log_extra=extra.__setitem__)
    assert extra["veriscale_pointwise"] == [False, False, True]
    rows = make_compute_score(BatchRewarder(verifier)).compute_score_batch(
        data_sources=["d"] * 3, solution_strs=["391 +", "381", "Paris +"], ground_truths=["391", "391", "Paris"],
        extra_infos=[{"question": TASK}, {"question": TASK}, {"question": "Capital of France?"}])
    assert [row["veriscale_pointwise"] for row in rows] == [0.0, 0.0, 1.0]
    assert all("veriscale_reward_length_corr" in row for row in rows)


def test_trl_logs_the_reward_length_correlation_per_step_from_completion_token_counts() -> None:
    """The graded double rewards '+' marks, so longer completions win: the correlation says so."""
    reward = TRLReward(Verifier(GradedModel(), scale="letters:5", criteria=ONE))
    metrics: dict = {}
    completions = ["391", "391 +", "391 + +", "391 + + +"]
    reward(prompts=[TASK] * 4, completions=completions, completion_ids=[[1] * (2 + 3 * i) for i in range(4)],
           trainer_state=None, log_metric=metrics.__setitem__)
    assert metrics["veriscale/reward_length_corr"] > 0.9
    metrics.clear()
    reward(prompts=[TASK] * 4, completions=completions, completion_ids=[[1] * (20 - 3 * i) for i in range(4)],
           log_metric=metrics.__setitem__)
    assert metrics["veriscale/reward_length_corr"] < -0.9  # the token counts given, not the characters


def test_length_control_takes_the_length_slope_out_and_keeps_each_groups_mean() -> None:
    rng = random.Random(0)
    control = LengthControl()
    for _ in range(6):  # steps: groups of 4 whose rewards follow log length plus a quality signal
        lengths = [int(math.exp(rng.uniform(3.0, 8.0))) for _ in range(8)]
        quality = [rng.gauss(0, 0.03) for _ in range(8)]
        rewards = [min(1.0, max(0.0, 0.1 * math.log1p(n) - 0.35 + q)) for n, q in zip(lengths, quality)]
        groups = [0] * 4 + [4] * 4
        adjusted = control.adjust(rewards, lengths, groups)
    assert correlation(rewards, lengths) > 0.8
    assert abs(correlation(adjusted, lengths)) < 0.5
    assert control.slope == pytest.approx(0.1, abs=0.03)
    for members in (range(4), range(4, 8)):
        assert sum(adjusted[i] for i in members) == pytest.approx(sum(rewards[i] for i in members), abs=0.02)
    assert LengthControl().adjust([0.2, 0.9], [10, 1000], [0, 0]) == [0.2, 0.9]  # too few points: unchanged
    assert control.adjust([0.7, None], [10, 10], [0, 1]) == [0.7, None]  # groups of one, None: as they are


def test_the_length_controlled_reward_through_trl_logs_both_correlations() -> None:
    reward = TRLReward(Verifier(GradedModel(), scale="letters:5", criteria=ONE), length_control="residual")
    metrics: dict = {}
    completions = ["391", "391 + + +", "391 +", "391 + +"] * 2
    prompts = [TASK] * 4 + ["Compute 19 * 21."] * 4
    for _ in range(2):  # the slope is pooled over steps (at least 8 ranked responses)
        rewards = reward(prompts=prompts, completions=completions, log_metric=metrics.__setitem__)
    assert metrics["veriscale/reward_length_corr_raw"] > 0.9
    assert abs(metrics.get("veriscale/reward_length_corr", 0.0)) < 0.5
    assert sum(rewards[:4]) / 4 == pytest.approx(0.5, abs=0.02)


def test_an_unknown_length_control_is_one_sentence() -> None:
    from veriscale.errors import UserError

    with pytest.raises(UserError, match=r"length_control.*unknown: use one of off, residual"):
        BatchRewarder(Verifier(GradedModel()), length_control="truncate")
