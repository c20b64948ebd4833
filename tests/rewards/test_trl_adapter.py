"""The TRL adapter, called by TRL's own GRPOTrainer on a tiny model built here (no downloads).

The policy is a randomly initialised one-layer Llama with a byte-level BPE tokenizer trained in
memory; its completions are noise, which is what a policy at step 0 writes. The reward is
veriscale's, judged by the real embedded model, or by the graded test double where a test
asserts an ordering.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.rewards.test_group_and_shaping import GradedModel
from tests.support.tiny_policy import grpo_trainer
from veriscale.errors import UserError
from veriscale.rewards import AsyncTRLReward, TRLReward
from veriscale.verify.reward import Verifier


class Recording(TRLReward):
    """The real adapter, remembering what TRL passed and what it answered."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[dict] = []

    def __call__(self, prompts, completions, **kwargs):
        rewards = super().__call__(prompts, completions, **kwargs)
        self.seen.append({"prompts": prompts, "completions": completions, "kwargs": kwargs, "rewards": rewards})
        return rewards


@pytest.mark.embedded
def test_grpo_trainer_trains_on_veriscale_rewards_from_the_embedded_model(embedded_model, tmp_path) -> None:
    reward = Recording(Verifier(embedded_model, scale="letters:5"), reference_column="solution")
    trainer = grpo_trainer(reward, tmp_path)
    trainer.train()
    assert len(reward.seen) == 2  # one call per step, from TRL's _calculate_rewards
    for call in reward.seen:
        assert {"completion_ids", "trainer_state", "log_extra", "log_metric", "solution"} <= set(call["kwargs"])
        assert len(call["rewards"]) == len(call["completions"]) == 4
        assert len(set(call["prompts"])) == 1  # the 4 completions of one prompt: one GRPO group
        scored = [r for r in call["rewards"] if r is not None]
        assert scored and all(0.0 < r < 1.0 for r in scored)
        assert sum(scored) / len(scored) == pytest.approx(0.5, abs=1e-6) or len(scored) < 4
    logged = {k for entry in trainer.state.log_history for k in entry}
    assert "rewards/veriscale/mean" in logged  # TRL logs the reward under the callable's name
    assert {"veriscale/model_calls", "veriscale/cache_hits"} <= logged  # cost via log_metric
    calls = [e["veriscale/model_calls"] for e in trainer.state.log_history if "veriscale/model_calls" in e]
    assert all(c > 0 for c in calls)


def test_async_reward_runs_on_trls_async_path_and_ranks_each_group(tmp_path) -> None:
    """GradedModel (test double) prefers '+' marks; TRL's policy writes noise, so we check the order."""
    reward = AsyncTRLReward(Verifier(GradedModel(), scale="letters:5"))
    seen: list = []

    async def recorded(prompts, completions, **kwargs):
        rewards = await reward(prompts, completions, **kwargs)
        seen.append((completions, rewards))
        return rewards

    recorded.__name__ = "veriscale"
    trainer = grpo_trainer(recorded, tmp_path, steps=1)
    trainer.train()
    assert len(seen) == 1
    completions, rewards = seen[0]
    marks = [c.count("+") for c in completions]
    assert len(set(marks)) > 1, "the seeded policy should write some '+' marks; without them nothing is ranked"
    for i in range(4):
        for j in range(4):
            if marks[i] > marks[j] and rewards[i] is not None and rewards[j] is not None:
                assert rewards[i] > rewards[j]
    assert trainer.state.log_history  # the step finished and logged


def test_conversational_prompts_and_per_criterion_logs() -> None:
    reward = TRLReward(Verifier(GradedModel(), scale="letters:5"))
    extra: dict = {}
    metrics: dict = {}
    prompt = [{"role": "system", "content": "Be exact."}, {"role": "user", "content": "Compute 17 * 23."}]
    completions = [[{"role": "assistant", "content": "391 + checked + twice"}],
                   [{"role": "assistant", "content": [{"type": "text", "text": "381"}]}],
                   [{"role": "assistant", "content": "391 +"}]]
    rewards = reward(prompts=[prompt] * 3, completions=completions, completion_ids=[[1], [2], [3]],
                     trainer_state=None, log_extra=lambda k, v: extra.setdefault(k, list(v)),
                     log_metric=lambda k, v: metrics.setdefault(k, v))
    assert rewards[0] > rewards[2] > rewards[1]
    assert extra["veriscale_group_size"] == [3, 3, 3]
    criteria = [k for k in extra if k != "veriscale_group_size"]
    assert criteria and all(len(extra[k]) == 3 for k in criteria)
    assert metrics["veriscale/model_calls"] > 0 and metrics["veriscale/failed"] == 0


def test_missing_completions_and_failed_verifications_are_none_never_zero() -> None:
    model = GradedModel()
    reward = TRLReward(Verifier(model, scale="letters:5"))
    rewards = reward(prompts=["p"] * 3, completions=["a +", None, ""])
    assert rewards[1] is None and rewards[2] is None and rewards[0] is not None
    model.fail_when = lambda request: True
    assert TRLReward(Verifier(model, scale="letters:5"))(prompts=["p", "p"], completions=["a", "b +"]) == [None, None]


@pytest.mark.parametrize("call, needle", [
    (dict(prompts=["p", "p"], completions=["a"]), "2 prompts but 1 completions"),
    (dict(prompts="p", completions=["a"]), "prompts must be a list"),
    (dict(prompts=[3], completions=["a"]), "prompt 0 is int"),
    (dict(prompts=["p"], completions=[{"text": "a"}]), "completion 0 is dict"),
    (dict(prompts=["p"], completions=[[{"content": "a"}]]), "not a chat message"),
])
def test_bad_batches_get_one_sentence(call, needle) -> None:
    with pytest.raises(UserError, match=needle):
        TRLReward(Verifier(GradedModel(), scale="letters:5"))(**call)


def test_an_unknown_reference_column_names_the_columns_the_batch_has() -> None:
    reward = TRLReward(Verifier(GradedModel(), scale="letters:5"), reference_column="answer")
    with pytest.raises(UserError, match="needs dataset column 'answer'.*solution"):
        reward(prompts=["p"], completions=["a"], solution=["4"], trainer_state=None)
    with pytest.raises(UserError, match="column 'answer' has 1 values for 2 completions"):
        reward(prompts=["p", "p"], completions=["a", "b"], answer=["4"])


def test_the_reference_answer_reaches_the_judge() -> None:
    model = GradedModel()
    TRLReward(Verifier(model, scale="letters:5"), reference_column="solution")(
        prompts=["Compute 17 * 23."], completions=["391"], solution=["391 (17 * 20 + 17 * 3)"])
    assert any("391 (17 * 20 + 17 * 3)" in str(call.messages) for call in model.calls)


def test_async_reward_is_seen_as_async_by_trl() -> None:
    from trl.trainer.utils import get_callable_name, is_async_callable

    verifier = Verifier(GradedModel(), scale="letters:5")
    assert is_async_callable(AsyncTRLReward(verifier)) and not is_async_callable(TRLReward(verifier))
    assert get_callable_name(TRLReward(verifier, name="judge")) == "judge"
    assert asyncio.run(AsyncTRLReward(verifier)(prompts=["p", "p"], completions=["a +", "a"]))[0] > 0.5
