"""The proxy's early pick (``veriscale.proxy.pick``): each candidate is scored pointwise as it
arrives, the top two are compared only when close, and at N = 3 with joint scoring a disagreeing
request costs at most 6 verifier calls.

The schedule is pure logic (tested alone first). The proxy tests run the real service, gateway,
store and HTTP front; the upstream is a FaultServer whose reply (and when it comes) depends on the
candidate's seed; the verifier is the scripted test double (it grades by the marker GOOD).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.proxy.conftest import fault_uri, index_of, probe_reply, proxied, settings_for
from tests.support.fault_server import FaultServer
from tests.support.scripted_model import ScriptedScoreModel
from veriscale.settings import source as setting_source
from veriscale.config import load_config
from veriscale.errors import UserError
from veriscale.models.base import ScoreRequest, ScoreResponse
from veriscale.proxy.fan_out import Sampled
from veriscale.proxy.conversation import Reply
from veriscale.proxy.pick import EarlySchedule
from veriscale.proxy.settings import ProxySettings, proxy_settings

QUESTION = [{"role": "user", "content": "How do I check my change?"}]
GUARD_S = 30.0  # hang guard: the expected wait is well under a second


def sampled(index: int, text: str | None) -> Sampled:
    return Sampled(index, "m", None if text is None else Reply(text=text), None if text else "HTTP 500", 0.1)


# -- the schedule alone ----------------------------------------------------------------------
def test_nothing_is_scored_until_two_different_actions_arrive() -> None:
    s = EarlySchedule(n=4)
    assert s.arrive(sampled(2, "Run  pytest.")) == []
    assert s.arrive(sampled(0, "Run pytest.")) == []  # the same action in other whitespace
    assert s.arrive(sampled(3, None)) == [] and not s.judging
    assert s.arrive(sampled(1, "Read the diff.")) == [2, 1] and s.judging and s.done
    assert s.key_of(0) == 2


def test_each_later_distinct_arrival_is_scored_at_once_and_a_repeat_is_not() -> None:
    s = EarlySchedule(n=4)
    assert s.arrive(sampled(0, "a")) == [] and s.arrive(sampled(1, "b")) == [0, 1]
    assert s.arrive(sampled(2, "c")) == [2] and s.arrive(sampled(3, "b")) == [] and s.done


def test_a_clear_pointwise_lead_wins_and_a_close_one_is_compared() -> None:
    s = EarlySchedule(n=3, margin=0.1)
    for i, text in enumerate("abc"):
        s.arrive(sampled(i, text))
    s.scored(0, 0.5), s.scored(1, 0.9), s.scored(2, 0.7)
    assert s.ranked() == [1, 2, 0] and s.decide() == ("pick", 1)
    s.scored(2, 0.85)
    assert s.decide() == ("compare", 1, 2)


def test_the_injection_policy_orders_suspects() -> None:
    def schedule(policy: str) -> EarlySchedule:
        s = EarlySchedule(n=2, policy=policy)
        s.arrive(sampled(0, "a")), s.arrive(sampled(1, "b"))
        s.scored(0, 0.9, suspected=True), s.scored(1, 0.6)
        return s

    assert schedule("none").decide() == ("pick", 0)
    assert schedule("exclude").decide() == ("pick", 1)  # a clean candidate beats an excluded one
    tie = schedule("lose_ties")
    tie.scored(1, 0.9)
    assert tie.ranked() == [1, 0]


# -- the settings ------------------------------------------------------------------------------
def test_auto_is_early_with_joint_scoring_above_three_candidates_and_the_setting_wins_otherwise() -> None:
    base = settings_for(("m", 3))
    assert base.schedule == "auto" and base.schedule_now(joint=True, n=4) == "early"
    assert base.schedule_now(joint=True, n=3) == "round_robin" == base.schedule_now(joint=False, n=5)
    assert settings_for(("m", 3), schedule="early").schedule_now(joint=False, n=3) == "early"
    assert settings_for(("m", 3), schedule="round_robin").schedule_now(joint=True, n=5) == "round_robin"
    with pytest.raises(UserError, match="'fast' is unknown: use one of auto, early, round_robin"):
        settings_for(("m", 3), schedule="fast")


def test_a_bad_schedule_or_margin_in_the_file_is_one_sentence(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[proxy]\nmargin = 2\n')
    with pytest.raises(UserError, match=r"proxy.margin = 2.0 is outside \[0, 1\]"):
        proxy_settings(load_config(config), fallback_model="m", n=3)
    config.write_text('[proxy]\nschedule = 3\n')
    with pytest.raises(UserError, match="proxy.schedule must be text, not 3"):
        proxy_settings(load_config(config), fallback_model="m", n=3)


# -- the proxy ---------------------------------------------------------------------------------
class Judge(ScriptedScoreModel):
    """TEST DOUBLE: the scripted scorer that answers the proxy's start-up probe, counts its score
    calls (``scored`` is set once ``wait_for`` of them came; ``finished`` counts those that returned)
    and can hang or fail."""

    def __init__(self, wait_for: int = 2) -> None:
        super().__init__()
        self.scored = threading.Event()
        self.wait_for = wait_for
        self.hang_s = 0.0
        self.lock = threading.Lock()
        self.judged = 0
        self.finished = 0
        self.questions: list[str] = []  # each score call's first user message, in the order they came

    def score(self, request: ScoreRequest) -> ScoreResponse:
        if (probe := probe_reply(request)) is not None:  # the start-up probe
            return probe
        with self.lock:
            self.judged += 1
            self.questions.append(next((m.content for m in request.messages if m.role == "user"), ""))
            if self.judged >= self.wait_for:
                self.scored.set()
        try:
            if self.hang_s:
                time.sleep(self.hang_s)
            return super().score(request)
        finally:
            with self.lock:
                self.finished += 1


@pytest.fixture()
def joint_on(monkeypatch: pytest.MonkeyPatch) -> None:
    setting_source.choose({"joint": "on"})  # what --joint chooses for the process (tests/conftest.py forgets it)


def ask(p) -> tuple[str, dict[str, Any], int]:
    raw = p.openai().chat.completions.with_raw_response.create(model="m", messages=QUESTION)
    run_id = int(raw.headers["x-veriscale-run"])
    return raw.parse().choices[0].message.content, p.run(run_id).result, run_id


def test_a_disagreeing_request_at_n3_with_joint_scoring_makes_at_most_6_calls_scoring_before_the_slowest(
        store_path: Path, joint_on) -> None:
    judge = Judge(wait_for=2)
    waited: list[bool] = []

    def reply(body: dict[str, Any]) -> str:
        if index_of(body) == 2:  # the slowest candidate answers only once the verifier got both earlier ones
            waited.append(judge.scored.wait(GUARD_S))
            return "GOOD: run pytest -q, then read the diff."
        return ["GOOD: run pytest -q.", "Push it and see."][index_of(body)]

    with FaultServer(chat_reply=reply) as up, \
            proxied(store_path, settings_for((fault_uri(up), 3), schedule="early"), judge) as p:
        text, result, run_id = ask(p)
        shown = httpx.get(f"{p.url}/api/runs/{run_id}/selection").json()  # the dashboard's selection page
    assert shown["method"] == "early" and len(shown["matrix"]) == 3 and len(shown["judgements"]) == 1
    assert shown["reason"] == result["reason"] and shown["usage"]["model_calls"] == 5
    assert result["how"] == "verified" and result["schedule"] == "early" == result["method"]
    usage = result["usage"]
    assert usage["model_calls"] == 5 <= 6  # 3 joint pointwise + 2 joint pairwise (the two GOOD ones tie)
    assert len([c for c in p.store.run_calls(run_id) if c["kind"] == "score"]) == 5
    assert result["pairwise"] is not None and result["pointwise_lead"] < result["margin"]
    assert result["winner"] in (0, 2) and "GOOD" in text
    events = [(e["event"], e["index"]) for e in result["events"]]
    slowest = events.index(("arrived", 2))
    assert waited == [True]  # two score calls reached the verifier while the slowest was still generating
    assert events.index(("score started", 0)) < slowest and events.index(("score started", 1)) < slowest
    assert events.index(("compare started", result["ranking"][0]["index"])) > slowest
    assert result["verify_after_last_s"] >= 0 and {r["index"] for r in result["ranking"]} == {0, 1, 2}
    assert "compared in both slot orders" in result["reason"]


def test_a_clear_pointwise_lead_skips_the_pairwise_comparison(store_path: Path, joint_on) -> None:
    replies = ["Push it and see.", "GOOD: run pytest -q.", "Push it now."]
    with FaultServer(chat_reply=lambda body: replies[index_of(body)]) as up, \
            proxied(store_path, settings_for((fault_uri(up), 3), schedule="early"), Judge()) as p:
        text, result, run_id = ask(p)
    assert result["how"] == "verified" and result["winner"] == 1 and text == replies[1]
    assert result["usage"]["model_calls"] == 3 and result["pairwise"] is None
    assert "no pairwise comparison ran" in result["reason"]


def test_agreeing_candidates_make_no_verifier_call_under_the_early_schedule(store_path: Path, joint_on) -> None:
    judge = Judge()
    with FaultServer(chat_reply="GOOD: run pytest -q.") as up, \
            proxied(store_path, settings_for((fault_uri(up), 3), schedule="early"), judge) as p:
        _, result, run_id = ask(p)
    assert result["how"] == "agreed" and result["schedule"] == "early"
    assert judge.judged == 0 and [c["kind"] for c in p.store.run_calls(run_id)] == ["chat"] * 3


def test_a_failed_candidate_is_left_out_of_the_early_pick(store_path: Path, joint_on) -> None:
    judge = Judge()
    replies = ["GOOD: run pytest -q.", "Push it and see.", "Push it now."]
    with FaultServer(chat_reply=lambda body: replies[index_of(body)]) as up, \
            proxied(store_path, settings_for((fault_uri(up), 3), schedule="early"), judge) as p:
        up.queue("500")
        _, result, _ = ask(p)
    failed = [c["index"] for c in result["candidates"] if c["error"]]
    assert len(failed) == 1 and result["how"] == "verified"
    assert ("failed", failed[0]) in [(e["event"], e["index"]) for e in result["events"]]
    assert len(result["ranking"]) == 2 and judge.judged == result["usage"]["model_calls"] <= 4


def test_a_verification_failure_returns_the_first_valid_candidate(store_path: Path, joint_on) -> None:
    judge = Judge()
    judge.fail_when = lambda req: True
    replies = ["GOOD: run pytest -q.", "Push it and see.", "Push it now."]
    with FaultServer(chat_reply=lambda body: replies[index_of(body)]) as up, \
            proxied(store_path, settings_for((fault_uri(up), 3), schedule="early"), judge) as p:
        text, result, _ = ask(p)
    assert result["how"] == "verification failed" and result["winner"] == 0 and text == replies[0]
    assert "scripted failure" in result["error"] and result["schedule"] == "early"
    assert result["reason"].startswith("verification failed (")


def test_the_timeout_gives_up_the_early_pick(store_path: Path, joint_on) -> None:
    judge = Judge()
    replies = ["GOOD: run pytest -q.", "Push it and see."]
    with FaultServer(chat_reply=lambda body: replies[index_of(body)]) as up, \
            proxied(store_path, settings_for((fault_uri(up), 2), timeout_s=1.0, schedule="early"), judge) as p:
        judge.hang_s = 2.0  # every judged call takes 2 s: past the 1 s timeout
        text, result, _ = ask(p)
        asked = judge.judged
        # the give-up cancelled the pick and waited for its calls in flight: all returned before the reply
        assert 1 <= asked <= 2 and judge.finished == asked, (judge.finished, asked)
        judge.hang_s = 0.0
        # a barrier: another request's whole pick (its calls and their answers) runs through the same
        # proxy after the first pick's calls returned; a pick left running would have asked again by then
        other = p.openai().chat.completions.create(model="m", messages=[{"role": "user", "content": "And now?"}])
        assert other.choices[0].message.content in replies
        first, then = judge.questions[:asked], judge.questions[asked:]
        assert all(QUESTION[0]["content"] in q for q in first), first
        assert then and all("And now?" in q for q in then), then  # the other pick's calls only: none came late
    assert result["how"] == "verification failed" and "1 s timeout" in result["error"]
    assert result["winner"] == 0 and text == replies[0] and result["schedule"] == "early"


@pytest.mark.parametrize("n,joint,expected", [(4, True, "early"), (4, False, "round_robin"), (3, True, "round_robin")])
def test_auto_picks_the_schedule_by_joint_and_n(store_path: Path, monkeypatch, n: int, joint: bool, expected: str) -> None:
    setting_source.choose({"joint": "on" if joint else "off"})
    replies = ["GOOD: run pytest -q.", "Push it and see.", "Push it now.", "Read the diff."]
    with FaultServer(chat_reply=lambda body: replies[index_of(body)]) as up, \
            proxied(store_path, settings_for((fault_uri(up), n)), Judge()) as p:
        _, result, _ = ask(p)
    assert result["schedule"] == expected and result["how"] == "verified"
    assert result["method"] == ("early" if expected == "early" else "round_robin" if n <= 3 else "ppt")


def test_the_settings_default_margin_matches_the_pick() -> None:
    from veriscale.proxy.pick import CLOSE_MARGIN

    assert ProxySettings(candidates=(("m", 3),)).margin == CLOSE_MARGIN


@pytest.mark.parametrize("source", ["flag", "env", "file", "auto"])
def test_veriscale_serve_takes_the_schedule_from_flag_environment_or_file(tmp_path: Path, monkeypatch, source: str) -> None:
    """At N = 2 auto is round_robin: early from each source shows the setting reached the pick."""
    import openai

    from tests.support.scripted_model import registered_scheme
    from tests.support.serve_in_process import serve_while
    from veriscale.engine.store import Store

    monkeypatch.delenv("VERISCALE_PROXY_SCHEDULE", raising=False)
    store = tmp_path / "s.sqlite3"
    replies = ["GOOD: run pytest -q.", "Push it and see."]
    with FaultServer(chat_reply=lambda body: replies[index_of(body)]) as up, \
            registered_scheme("scripted", lambda uri: Judge(), ("scripted",)):
        config = tmp_path / "config.toml"
        config.write_text("[proxy]\nprogress = false\n" + ('schedule = "early"\n' if source == "file" else "")
                          + f'[[proxy.candidates]]\nmodel = "{fault_uri(up)}"\nn = 2\n')
        monkeypatch.setenv("VERISCALE_CONFIG", str(config))
        if source == "env":
            monkeypatch.setenv("VERISCALE_PROXY_SCHEDULE", "early")
        flag = ["--proxy-schedule", "early"] if source == "flag" else []

        def ask_once(url: str) -> str:
            client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=60)
            raw = client.chat.completions.with_raw_response.create(model="m", messages=QUESTION, max_tokens=16)
            return raw.headers["x-veriscale-run"]

        run_id = serve_while(monkeypatch, ["--joint"], ["--model", "scripted", "--store", str(store), *flag], ask_once)
    run = Store.open(store).run(int(run_id))
    assert run is not None and run.result["how"] == "verified"
    assert run.result["schedule"] == ("round_robin" if source == "auto" else "early")
