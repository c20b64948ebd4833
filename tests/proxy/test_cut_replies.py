"""A reply cut at max_tokens is unfinished: while any candidate finished, the proxy leaves the cut
ones out of the agreement and the pick (both schedules), records them as ``cut`` and says so.

The upstream is a FaultServer whose reply (and its finish reason) depends on the candidate's
seed; the verifier is the scripted test double of test_early_pick (it grades by the marker GOOD,
so a cut GOOD reply would win if the cut were ignored).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.proxy.conftest import fault_uri, index_of, proxied, settings_for
from tests.proxy.test_early_pick import Judge, ask, sampled
from tests.support.fault_server import FaultServer
from veriscale.proxy.conversation import Reply
from veriscale.proxy.fan_out import Sampled
from veriscale.proxy.pick import EarlySchedule
from veriscale.proxy.pick_outcome import complete_first
from veriscale.settings import source as setting_source

@pytest.fixture(autouse=True)
def _joint_on() -> None:
    setting_source.choose({"joint": "on"})  # one joint score call a candidate (tests/conftest.py forgets it)


CUT_GOOD = {"content": "GOOD: run pytest -q and then read", "finish_reason": "length"}


def replies(*texts: Any):
    return lambda body: texts[index_of(body)]


def cut(index: int, text: str) -> Sampled:
    return Sampled(index, "m", Reply(text=text, truncated=True), None, 0.1)


def test_the_finished_candidates_are_chosen_among_and_all_stay_when_every_one_was_cut() -> None:
    a, b, c = sampled(0, "a"), cut(1, "b"), sampled(2, "c")
    assert complete_first([a, b, c]) == ([a, c], [1])
    assert complete_first([cut(0, "x"), cut(1, "y")])[1] == []  # nothing finished: none is left out
    assert complete_first([]) == ([], [])


def test_the_schedule_scores_only_finished_replies_while_any_finished_and_ranks_the_cut_last() -> None:
    s = EarlySchedule(n=3, margin=0.1)
    # a cut reply is not scored on arrival; the pick starts at the second finished action
    assert [s.arrive(cut(0, "GOOD")), s.arrive(sampled(1, "b")), s.arrive(sampled(2, "c"))] == [[], [], [1, 2]]
    assert s.late() == [] and s.judging
    s.scored(1, 0.40), s.scored(2, 0.38)
    assert s.ranked() == [1, 2, 0] and s.decide() == ("compare", 1, 2)  # the finished two are close
    s.scored(2, 0.1)
    assert s.decide() == ("pick", 1)
    lone = EarlySchedule(n=2)  # one finished reply among cut ones: nothing to judge, nothing scored
    assert [lone.arrive(cut(0, "GOOD")), lone.arrive(sampled(1, "b")), lone.late()] == [[], [], []]
    assert not lone.judging
    every = EarlySchedule(n=3)  # every reply cut: scored once all arrived, and the rewards decide
    assert [every.arrive(cut(0, "GOOD")), every.arrive(cut(1, "b")), every.arrive(cut(2, "b"))] == [[], [], []]
    assert every.late() == [0, 1] and every.late() == []  # asked once; the agreeing third shares key 1
    every.scored(0, 0.95), every.scored(1, 0.2)
    assert every.decide() == ("pick", 0) and not every.cut(1)


def test_a_cut_reply_that_arrives_again_finished_is_scored_then() -> None:
    s = EarlySchedule(n=3)
    assert [s.arrive(cut(0, "GOOD")), s.arrive(sampled(1, "b")), s.arrive(sampled(2, "GOOD"))] == [[], [], [0, 1]]
    assert s.key_of(2) == 0 and not s.cut(0)


def test_the_one_finished_candidate_is_returned_without_a_verifier_call(store_path: Path) -> None:
    judge = Judge()
    upstream = replies("Push it and see.", CUT_GOOD)
    with FaultServer(chat_reply=upstream) as up, \
            proxied(store_path, settings_for((fault_uri(up), 2), schedule="round_robin"), judge) as p:
        text, result, _ = ask(p)
    assert result["how"] == "only one complete" and result["winner"] == 0 and text == "Push it and see."
    assert result["cut"] == [1] and "candidate 1 stopped at max_tokens" in result["reason"]
    assert judge.judged == 0


def test_finished_candidates_that_agree_win_over_a_cut_one(store_path: Path) -> None:
    judge = Judge()
    upstream = replies(CUT_GOOD, "Push it and see.", "Push it and see.")
    with FaultServer(chat_reply=upstream) as up, \
            proxied(store_path, settings_for((fault_uri(up), 3), schedule="round_robin"), judge) as p:
        text, result, _ = ask(p)
    assert result["how"] == "agreed" and result["winner"] == 1 and text == "Push it and see."
    assert result["cut"] == [0] and "left out" in result["reason"] and judge.judged == 0


@pytest.mark.parametrize("schedule", ["round_robin", "early"])
def test_the_pick_ranks_the_cut_candidate_after_the_finished_ones(store_path: Path, schedule: str) -> None:
    upstream = replies(CUT_GOOD, "Push it and see.", "GOOD: run pytest -q.")
    with FaultServer(chat_reply=upstream) as up, \
            proxied(store_path, settings_for((fault_uri(up), 3), schedule=schedule), Judge()) as p:
        text, result, _ = ask(p)
    assert result["how"] == "verified" and result["winner"] == 2 and text == "GOOD: run pytest -q."
    assert result["cut"] == [0] and "candidate 0 stopped at max_tokens" in result["reason"]
    if schedule == "round_robin":  # the tournament ran over the finished two only
        assert {r["index"] for r in result["ranking"]} == {1, 2}
    else:  # the cut one was never scored (no call, no budget), and ranks last
        assert result["ranking"][-1]["index"] == 0 and result["ranking"][-1]["score"] is None
        assert ("score started", 0) not in [(e["event"], e["index"]) for e in result["events"]]
        assert result["usage"]["model_calls"] == 2  # one joint score for each finished candidate, no comparison


@pytest.mark.parametrize("schedule", ["round_robin", "early"])
def test_when_every_candidate_was_cut_both_schedules_pick_by_the_verifier(store_path: Path, schedule: str) -> None:
    upstream = replies({"content": "Push it and", "finish_reason": "length"}, CUT_GOOD)
    with FaultServer(chat_reply=upstream) as up, \
            proxied(store_path, settings_for((fault_uri(up), 2), schedule=schedule), Judge()) as p:
        text, result, _ = ask(p)
    assert result["how"] == "verified" and result["winner"] == 1 and text == CUT_GOOD["content"]
    assert "cut" not in result
