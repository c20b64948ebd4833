"""Joint scoring logic with the scripted TEST DOUBLE: calls counted, slots mapped, fallback per slot."""

import pytest

from tests.support.scripted_model import ScriptedScoreModel
from veriscale.settings import source as setting_source
from veriscale.engine.sync_facade import CallExecutor
from veriscale.engine.store import Store
from veriscale.errors import UserError
from veriscale.models.base import ScoreResponse
from veriscale.verify import joint as joint_scoring
from veriscale.verify.prompts import PROMPT_VERSION
from veriscale.verify.reward import Verifier

TASK = "Do the thing."


def make(tmp_path, joint=True, name="s", **kw):
    model = ScriptedScoreModel()
    return model, Verifier(model, store=Store.open(tmp_path / f"{name}.sqlite3"), criteria="agent", joint=joint, **kw)


def test_pointwise_joint_is_one_call_for_every_criterion_and_matches_separate(tmp_path):
    model, v = make(tmp_path)
    res = v.score(TASK, "GOOD answer")
    assert res.usage.model_calls == 1 and len(model.calls) == 1
    assert model.calls[0].joint == ("\nOutput:", "\nErrors:")
    assert sorted(r.criterion for r in res.readings) == ["Errors", "Output", "Specification"]
    _, sep = make(tmp_path, joint=False, name="sep")
    alone = sep.score(TASK, "GOOD answer")
    assert alone.usage.model_calls == 3
    assert res.criterion_rewards() == pytest.approx(alone.criterion_rewards())
    assert res.reward == pytest.approx(alone.reward)


def test_pairwise_joint_is_one_call_per_slot_order_and_reads_each_side(tmp_path):
    model, v = make(tmp_path)
    res = v.compare(TASK, "GOOD answer", "bad answer")
    assert res.usage.model_calls == 2  # K = 2 slot orders, not 2 * 2 * C
    assert {r.order for r in res.readings} == {"AB", "BA"}
    assert len(res.readings) == 2 * 2 * 3
    for r in res.readings:  # each slot was read from its own response's block
        assert r.value == pytest.approx(res.criteria[r.criterion]["reward_a" if r.candidate == "a" else "reward_b"])
    _, sep = make(tmp_path, joint=False, name="sep")
    alone = sep.compare(TASK, "GOOD answer", "bad answer")
    assert alone.usage.model_calls == 12
    assert (res.reward_a, res.reward_b, res.p_a_wins) == pytest.approx((alone.reward_a, alone.reward_b, alone.p_a_wins))
    tokens = sum(r.prompt_tokens for r in res.readings)
    assert tokens == res.usage.prompt_tokens == 2 * 10  # a call's tokens sit on its first slot only


def test_an_unreadable_slot_is_asked_alone_counted_and_named(tmp_path):
    model, v = make(tmp_path)
    model.unreadable_slot = lambda i, req: i == 1  # Output of every joint reply
    res = v.score(TASK, "GOOD answer")
    assert not res.failed
    assert res.usage.model_calls == 2  # the joint call and Output alone
    assert [c.joint for c in model.calls] == [("\nOutput:", "\nErrors:"), ()]
    assert "## Criterion: Output" in model.calls[1].messages[-1].content
    assert any(n.startswith("slot Output (repeat 0) re-asked alone: ") for n in res.notes), res.notes
    assert res.criteria["Output"]["readings"] == 1


def test_a_joint_reply_with_no_readable_slot_falls_back_for_every_slot(tmp_path):
    model, v = make(tmp_path)
    model.unreadable_slot = lambda i, req: True
    res = v.compare(TASK, "GOOD", "bad")
    assert not res.failed and res.reward_a > res.reward_b
    assert res.usage.model_calls == 2 + 12
    assert sum("re-asked alone" in n for n in res.notes) == 12


def test_a_joint_reply_shorter_than_its_slots_falls_back_for_the_missing_ones(tmp_path):
    model, v = make(tmp_path)
    real = model.score

    def cut(req):
        resp = real(req)
        if req.joint:
            resp.slots = resp.slots[:1]
        return resp

    model.score = cut
    res = v.score(TASK, "GOOD")
    assert res.usage.model_calls == 3
    assert sum("did not reach it" in n for n in res.notes) == 2


def test_a_failed_joint_call_fails_the_verdict_without_asking_each_slot(tmp_path):
    model, v = make(tmp_path)
    model.fail_when = lambda req: bool(req.joint)
    res = v.score(TASK, "GOOD")
    assert res.failed and res.reward is None
    assert len(model.calls) == 1


def test_joint_and_separate_requests_never_share_a_cache_key(tmp_path):
    model, v = make(tmp_path)
    _, sep = make(tmp_path, joint=False, name="sep")
    ex = CallExecutor(model, None, prompt_version=PROMPT_VERSION)
    joint_keys = {c.key for c in ex.keyed(v.plan_compare(TASK, "GOOD", "bad")[0] + v.plan_score(TASK, "GOOD")[0])}
    sep_keys = {c.key for c in ex.keyed(sep.plan_compare(TASK, "GOOD", "bad")[0] + sep.plan_score(TASK, "GOOD")[0])}
    assert len(joint_keys) == 3 and len(sep_keys) == 12 + 3
    assert not joint_keys & sep_keys
    one = sep.plan_score(TASK, "GOOD")[0][0].request
    assert "joint" not in one.to_dict()  # a one-slot request keeps the key it had before joint scoring


def test_joint_answers_come_from_the_cache_on_a_rerun(tmp_path):
    model, v = make(tmp_path)
    v.compare(TASK, "GOOD", "bad")
    again = Verifier(model, store=v.executor.store, criteria="agent", joint=True).compare(TASK, "GOOD", "bad")
    assert again.usage.model_calls == 0 and again.usage.cache_hits == 2
    assert again.p_a_wins is not None


def test_stored_joint_reply_round_trips_its_slots():
    resp = ScoreResponse(label_probs={"A": 1.0}, label_mass=0.9,
                         slots=[{"label_probs": {"A": 1.0}, "label_mass": 0.9, "unseen_mass": 0.0,
                                 "written": "A", "problem": None}])
    assert ScoreResponse.from_dict(resp.to_dict()) == resp


def test_reasoning_and_backends_without_joint_support_score_separately_and_say_so(tmp_path):
    model, v = make(tmp_path, reasoning=True)
    res = v.score(TASK, "GOOD")
    assert res.usage.model_calls == 3 and any("not used with reasoning" in n for n in res.notes)
    model.supports_joint = lambda: False
    _, plain = make(tmp_path, name="p")
    plain.model.supports_joint = lambda: False
    res = plain.score(TASK, "GOOD")
    assert res.usage.model_calls == 3 and any("cannot hold a joint reply to its format" in n for n in res.notes)


def test_joint_default_reads_the_environment(monkeypatch):
    setting_source.choose({})  # the conftest forgets choices too; start from none here all the same
    monkeypatch.delenv(joint_scoring.JOINT_ENV, raising=False)
    assert joint_scoring.joint_default() is False
    monkeypatch.setenv(joint_scoring.JOINT_ENV, "on")
    assert joint_scoring.joint_default() is True
    assert Verifier(ScriptedScoreModel()).joint is True
    monkeypatch.setenv(joint_scoring.JOINT_ENV, "maybe")
    with pytest.raises(UserError, match="VERISCALE_JOINT='maybe' is not on or off"):
        joint_scoring.joint_default()


def test_a_single_criterion_joint_score_is_read_from_the_one_slot_reply(tmp_path):
    model = ScriptedScoreModel()
    v = Verifier(model, store=Store.open(tmp_path / "s.sqlite3"), criteria="general", joint=True)
    v.criteria = v.criteria.only(["Correctness"])
    res = v.score(TASK, "GOOD answer")
    assert res.usage.model_calls == 1 and not res.notes
    assert "Reply in exactly this format" in model.calls[0].messages[-1].content
