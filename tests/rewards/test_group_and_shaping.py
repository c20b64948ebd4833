"""Group-relative rewards and progress shaping, on scripted test doubles."""

from __future__ import annotations

import pytest

from tests.support.scripted_model import ScriptedScoreModel
from tests.support.scripted_progress import ScriptedProgressModel
from veriscale.data.model import Step
from veriscale.models.base import ScoreRequest, ScoreResponse
from veriscale.progress import ProgressJudge, ProgressTracker
from veriscale.rewards import GroupRewarder, ProgressShaper, bradley_terry_rewards, groups_by_prompt, shaped_rewards
from veriscale.verify.reward import Verifier

TASK = "Compute 17 * 23 and show the steps."


class GradedModel(ScriptedScoreModel):
    """TEST DOUBLE: grades a response by how many '+' marks it carries (0 marks: the worst label)."""

    def score(self, request: ScoreRequest) -> ScoreResponse:
        self.calls.append(request)
        if self.fail_when(request):
            from veriscale.errors import ModelCallError

            raise ModelCallError("scripted failure")
        labels = request.labels
        marks = min(self._slot_text(request).count("+"), len(labels) - 1)
        label = labels[len(labels) - 1 - marks]
        return ScoreResponse(label_probs={lab: float(lab == label) for lab in labels}, label_mass=0.9,
                             prompt_tokens=10, prompt_tokens_total=10)


def test_an_all_wrong_group_still_ranks_the_less_wrong_higher() -> None:
    wrong = ["391? no: 17*23 = 381", "17*23 = 371 + carried the 1", "17*23 = 401 + + (20*17 = 340, 3*17 = 51)"]
    verifier = Verifier(GradedModel(), scale="letters:5", criteria="general")
    pointwise = [verifier.score(TASK, w).reward for w in wrong]
    group = GroupRewarder(verifier).group(TASK, wrong)
    assert group.rewards[0] < group.rewards[1] < group.rewards[2]
    assert sum(group.rewards) / 3 == pytest.approx(0.5)  # Bradley–Terry rewards are centred
    assert max(group.rewards) - min(group.rewards) > max(pointwise) - min(pointwise)


def test_missing_and_identical_completions() -> None:
    verifier = Verifier(GradedModel(), scale="letters:5", criteria="general")
    result = GroupRewarder(verifier).group(TASK, ["a +", None, "  ", "a +", "b"])
    assert result.rewards[1] is None and result.rewards[2] is None
    assert result.rewards[0] == result.rewards[3] > result.rewards[4]
    assert any("completion 1 is empty" in e for e in result.errors)
    same = GroupRewarder(verifier).rewards(TASK, ["x", "x", "x"])
    assert same == [0.5, 0.5, 0.5]


def test_a_failed_verification_is_none_never_zero() -> None:
    model = GradedModel()
    model.fail_when = lambda req: True
    result = GroupRewarder(Verifier(model, scale="letters:5")).group(TASK, ["a", "b +"])
    assert result.rewards == [None, None] and result.errors
    single = GroupRewarder(Verifier(model, scale="letters:5")).group(TASK, ["a"])
    assert single.rewards == [None]


def test_bradley_terry_rewards_and_prompt_groups() -> None:
    assert bradley_terry_rewards([0.0]) == [0.5]
    low, mid, high = bradley_terry_rewards([-1.0, 0.0, 1.0])
    assert low < mid < high and mid == pytest.approx(0.5) and low + high == pytest.approx(1.0)
    assert groups_by_prompt(["a", "b", "a", "c", "b"]) == [[0, 2], [1, 4], [3]]


def test_shaping_telescopes_and_skips_unscored_steps() -> None:
    env, progress = [0.0, 0.0, 0.0, 1.0], [0.25, None, 0.5, 0.75]
    shaped = shaped_rewards(env, progress, lam=0.4)
    assert shaped == pytest.approx([0.1, 0.0, 0.1, 1.1])
    assert sum(shaped) == pytest.approx(sum(env) + 0.4 * 0.75)


def test_online_shaper_follows_the_tracker() -> None:
    shaper = ProgressShaper(ProgressTracker("t", judge=ProgressJudge(ScriptedProgressModel())), lam=1.0)
    rewards = [shaper.step(Step(role="agent", text=t), env) for t, env in (("UP", 0.0), ("x", 0.0), ("DOWN", 0.0))]
    assert rewards == pytest.approx([0.25, 0.0, -0.25])
