"""Verdict logic with the scripted TEST DOUBLE (no real model): repeats, slots, aggregation."""

import pytest

from tests.support.scripted_model import ScriptedScoreModel
from veriscale.engine.store import Store
from veriscale.errors import BudgetExceeded, UserError
from veriscale.verify.reward import Verifier, sigmoid

TASK = "Do the thing."


def make(tmp_path, **kw):
    model = ScriptedScoreModel()
    v = Verifier(model, store=Store.open(tmp_path / "s.sqlite3"), **kw)
    return model, v


def test_pairwise_repeats_alternate_slot_order_and_cancel_position(tmp_path):
    model, v = make(tmp_path, repeats=2, criteria="agent")
    res = v.compare(TASK, "GOOD answer", "bad answer")
    orders = {(r.repeat, r.order) for r in res.readings}
    assert orders == {(0, "AB"), (1, "BA")}
    # each candidate sat in slot A once and in slot B once per criterion
    for who in ("a", "b"):
        slots = sorted(r.slot for r in res.readings if r.candidate == who and r.criterion == "Output")
        assert slots == ["A", "B"]
    assert res.reward_a > res.reward_b
    assert res.p_a_wins == pytest.approx(sigmoid((res.reward_a - res.reward_b) / res.tau))
    assert len(model.calls) == 2 * 3 * 2  # K orders x C criteria x 2 slots


def test_repeats_without_sampling_collapse_and_say_so(tmp_path):
    model, v = make(tmp_path, repeats=5)
    res = v.compare(TASK, "GOOD", "bad")
    assert res.repeats_effective == 2 and res.repeats_requested == 5
    assert any("collapsed" in n for n in res.notes)
    s = v.score(TASK, "GOOD")
    assert s.repeats_effective == 1


def test_reasoning_repeats_each_get_their_own_seed(tmp_path):
    model, v = make(tmp_path, repeats=3, reasoning=True, seed=7, criteria="agent")
    res = v.score(TASK, "GOOD")
    assert res.repeats_effective == 3
    assert sorted({r.seed for r in res.readings}) == [7, 8, 9]


def test_reward_is_mean_over_criteria_and_repeats(tmp_path):
    _, v = make(tmp_path, criteria="agent", scale="letters:5")
    res = v.score(TASK, "GOOD")
    expected = 0.8 * 1.0 + 0.2 * 0.5  # best label 0.8, middle label 0.2
    assert res.reward == pytest.approx(expected)
    assert set(res.criteria) == {"Specification", "Output", "Errors"}


def test_a_failed_call_fails_the_verdict_instead_of_scoring_it(tmp_path):
    model, v = make(tmp_path, criteria="agent")
    model.fail_when = lambda req: "## Criterion: Errors" in req.messages[-1].content
    res = v.compare(TASK, "GOOD", "bad")
    assert res.failed and res.p_a_wins is None and res.reward_a is None
    assert any("Errors" in e for e in res.errors)
    # the rerun retries only the failed calls
    model.fail_when = lambda req: False
    model.calls.clear()
    res2 = v.compare(TASK, "GOOD", "bad")
    assert not res2.failed and len(model.calls) == 4  # 2 orders x 2 slots of one criterion


def test_rerun_is_served_from_the_store(tmp_path):
    model, v = make(tmp_path)
    v.compare(TASK, "GOOD", "bad")
    n = len(model.calls)
    again = v.compare(TASK, "GOOD", "bad")
    assert len(model.calls) == n
    assert again.usage.model_calls == 0 and again.usage.cache_hits == n


def test_max_calls_refuses_before_spending(tmp_path):
    model, v = make(tmp_path, max_calls=3)
    with pytest.raises(BudgetExceeded, match=r"call budget \(max_calls\)"):
        v.compare(TASK, "GOOD", "bad")
    assert model.calls == []


def test_dry_run_estimate_counts_uncached_calls(tmp_path):
    model, v = make(tmp_path, criteria="agent")
    est = v.estimate_compare(TASK, "GOOD", "bad")
    assert est.calls == 12 and est.cached == 0 and est.prompt_tokens > 0
    v.compare(TASK, "GOOD", "bad")
    assert v.estimate_compare(TASK, "GOOD", "bad").calls == 0


def test_labels_that_are_not_single_tokens_are_refused(tmp_path):
    _, v = make(tmp_path, scale="labels:excellent,poor")
    with pytest.raises(UserError, match="not single tokens"):
        v.score(TASK, "GOOD")


def test_empty_candidate_is_refused(tmp_path):
    _, v = make(tmp_path)
    with pytest.raises(UserError, match="empty"):
        v.score(TASK, "   ")


def test_discrete_mode_takes_the_argmax(tmp_path):
    _, v = make(tmp_path, discrete=True, scale="letters:5")
    assert v.score(TASK, "GOOD").reward == pytest.approx(1.0)


def test_low_label_mass_is_flagged(tmp_path):
    model = ScriptedScoreModel(mass=0.1)
    v = Verifier(model, store=None)
    res = v.score(TASK, "GOOD")
    assert res.low_label_mass and res.to_dict()["low_label_mass"] is True
