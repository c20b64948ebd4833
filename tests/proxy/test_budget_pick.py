"""``[proxy] budget``: the proxy's pick plans inside a per-request budget of verifier calls or
tokens (``veriscale.proxy.budget_plan``), never starts a verifier call it cannot pay for, records
what it spent and why on the run, and a budget too small for one comparison is refused at start.

Requests go through the official openai SDK to the real proxy (service, gateway, store, HTTP
front); the upstream is a FaultServer whose reply depends on the candidate's seed. The verifier
is the embedded model (real logprobs) for the budget checks end to end, and the scripted test
double ``Judge`` (grades by the marker GOOD, counts its calls) where a test is about the plan's
logic; the refusal runs ``veriscale serve`` with a FaultServer as its model.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import openai
import pytest
from typer.testing import CliRunner

from tests.proxy.conftest import fault_uri, index_of, probe_reply, proxied, settings_for
from tests.support.fault_server import FaultServer
from tests.support.scripted_model import ScriptedScoreModel
from veriscale.settings import source as setting_source
from veriscale.config import load_config
from veriscale.engine.run_log import RunLog
from veriscale.engine.store import Store
from veriscale.errors import UserError
from veriscale.models.base import ScoreRequest, ScoreResponse
from veriscale.proxy.budget_plan import plan_pick, refuse_if_too_small
from veriscale.verify.reward import Verifier

QUESTION = [{"role": "user", "content": "How do I check my change before I push it?"}]
REPLIES = ["GOOD: run pytest -q, then read the diff.", "Push it and see what CI says.", "GOOD: run pytest -q."]


class Judge(ScriptedScoreModel):
    """TEST DOUBLE: the scripted scorer (GOOD grades high), answering the start-up probe and counting
    the calls it judged."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.judged = 0
        self.after_call = lambda: None

    def score(self, request: ScoreRequest) -> ScoreResponse:
        if (probe := probe_reply(request)) is not None:  # the start-up probe
            return probe
        with self.lock:
            self.judged += 1
        self.after_call()
        return super().score(request)


@pytest.fixture()
def joint_off() -> None:
    setting_source.choose({"joint": "off"})


def ask(p, question=QUESTION) -> tuple[str, dict[str, Any], int]:
    client = openai.OpenAI(base_url=p.url + "/v1", api_key="unused", max_retries=0, timeout=600)  # no timed failure
    raw = client.chat.completions.with_raw_response.create(model="m", messages=question)
    run_id = int(raw.headers["x-veriscale-run"])
    return raw.parse().choices[0].message.content, p.run(run_id).result, run_id


def verifier_calls(p, run_id: int) -> int:
    """The verifier calls the request's run made (the store's record, not the pick's own count); a
    cache hit linked to the run is no call."""
    return len([c for c in p.score_calls(run_id) if not c["cache_hit"]])


# -- the plan --------------------------------------------------------------------------------
def test_the_plan_keeps_the_schedule_and_criteria_the_budget_affords(joint_off) -> None:
    verifier = Verifier(Judge(), criteria="agent")  # 3 criteria, scored separately

    def plan(budget: str, schedule: str = "early", n: int = 3, joint: bool = False):
        return plan_pick(settings_for(("m", n), schedule=schedule, budget=budget), verifier, n, joint)

    # the early pick's worst case at N = 3: 3 scores of c calls and a comparison of 2 orders x 2 slots x c
    assert (plan("calls=21").schedule, plan("calls=21").criteria) == ("early", 3)
    assert plan("calls=20").criteria == 2 and plan("calls=20").worst_calls == 14
    assert plan("calls=7").criteria == 1 and "first 1 of 3 criteria" in plan("calls=7").why
    explicit = plan("calls=4")  # not even one criterion's worst case fits: paid call by call
    assert (explicit.schedule, explicit.criteria) == ("early", 1) and "not started" in explicit.why
    # auto would be early (joint, N > 3) but falls back to the cost controller when early cannot fit
    assert plan("calls=4", "auto", n=4, joint=True).schedule == "round_robin"
    assert plan("calls=50", "auto", n=4, joint=True).schedule == "early"
    assert plan("calls=50", "round_robin").schedule == "round_robin"
    assert plan("calls=50", "auto", n=3).schedule == "round_robin"
    assert plan("tokens=9000").criteria == 3 and "paid as it starts" in plan("tokens=9000").why


def test_a_budget_below_one_comparison_is_refused_naming_the_smallest(joint_off) -> None:
    verifier = Verifier(Judge(), criteria="agent")
    with pytest.raises(UserError) as refused:
        refuse_if_too_small(settings_for(("m", 3), budget="calls=1"), verifier)
    text = str(refused.value)
    assert "cannot pay for one comparison" in text and "proxy_budget='calls=2'" in text and "\n" not in text
    refuse_if_too_small(settings_for(("m", 3), budget="calls=2"), verifier)  # one slot order on one criterion
    with pytest.raises(UserError, match=r"proxy_budget='tokens=\d+'"):
        refuse_if_too_small(settings_for(("m", 3), budget="tokens=20"), verifier)
    setting_source.choose({"joint": "on"})
    refuse_if_too_small(settings_for(("m", 3), budget="calls=1"), Verifier(Judge(), criteria="agent"))  # 1 joint call


def test_a_budget_in_the_file_that_is_not_one_is_one_sentence(tmp_path: Path) -> None:
    from veriscale.cli.settings import resolve

    config = tmp_path / "config.toml"
    config.write_text('[proxy]\nbudget = "six calls"\n')
    with pytest.raises(UserError, match="proxy.budget = 'six calls' is not a budget: write calls=N or tokens=N"):
        resolve(load_config(config), {}, {})


# -- the proxy -------------------------------------------------------------------------------
@pytest.mark.parametrize("amount", [6, 12])
def test_the_embedded_verifier_never_spends_more_calls_than_the_budget_per_request(
        store_path: Path, verifier, joint_off, amount: int) -> None:
    """Round robin under a budget is the cost controller: 3 disagreeing candidates, 3 criteria (18
    calls without a budget)."""
    questions = [QUESTION, [{"role": "user", "content": "Which test command should I run first?"}]][:3 - amount // 6]
    with FaultServer(chat_reply=lambda body: REPLIES[index_of(body)]) as up, \
            proxied(store_path, settings_for((fault_uri(up), 3), budget=f"calls={amount}", timeout_s=600.0),
                    verifier) as p:  # a loaded machine must not turn the pick into a timeout
        runs = [ask(p, q) for q in questions]
        events = [[e.data for e in RunLog(p.store).since(run_id) if e.kind == "budget"] for _, _, run_id in runs]
        made = [verifier_calls(p, run_id) for _, _, run_id in runs]
    for (text, result, run_id), steps, calls in zip(runs, events, made):
        assert result["how"] == "verified" and text in REPLIES
        assert 0 < calls <= amount and result["usage"]["model_calls"] == calls  # the store's count, within it
        budget = result["budget"]
        assert budget["budget"] == f"calls={amount}" and budget["spent"] == calls
        assert budget["left"] == amount - calls and budget["plan"]["schedule"] == "round_robin"
        assert [s["step"] for s in budget["steps"][:2]] == ["granularity", "ring"]
        assert "first criterion" in budget["steps"][1]["why"]  # below PPT on all 3 criteria: it screens
        assert steps == budget["steps"]  # each step was on the run as it was taken


def test_the_early_pick_pays_each_call_before_it_starts_and_records_what_it_skipped(
        store_path: Path, joint_off) -> None:
    """TEST DOUBLE verifier (logic): calls=4 cannot pay the early pick's worst case on one criterion."""
    judge = Judge()
    replies = ["GOOD: run pytest -q.", "GOOD: run pytest -q, then read the diff.", "Push it and see."]
    with FaultServer(chat_reply=lambda body: replies[index_of(body)]) as up, \
            proxied(store_path, settings_for((fault_uri(up), 3), schedule="early", budget="calls=4"), judge) as p:
        text, result, run_id = ask(p)
        calls = verifier_calls(p, run_id)
    assert calls == judge.judged == 3 <= 4  # three one-criterion scores; the comparison (4, or 2) did not fit
    budget = result["budget"]
    assert [s["step"] for s in budget["steps"]] == ["score", "score", "score", "skipped"]
    assert budget["spent"] == 3 and budget["stop_reason"] == "budget spent" and budget["plan"]["criteria"] == 1
    assert "needs 2 and 1 is left" in budget["steps"][-1]["why"]
    assert result["pairwise"] is None and "did not pay for the comparison" in result["reason"]
    assert text.startswith("GOOD") and result["how"] == "verified"


def test_a_score_the_budget_cannot_pay_for_is_not_started(store_path: Path, joint_off) -> None:
    """TEST DOUBLE verifier (logic): calls=2 pays two one-criterion scores; the third candidate, the
    best one, arrives after them and stays unscored."""
    judge = Judge()
    replies = ["Push it and see.", "Push it now.", "GOOD: run pytest -q."]
    two_scored = threading.Event()
    judge.after_call = lambda: judge.judged >= 2 and two_scored.set()

    def reply(body: dict[str, Any]) -> str:
        if index_of(body) == 2:
            assert two_scored.wait(30.0), "the first two scores never reached the verifier"
        return replies[index_of(body)]

    with FaultServer(chat_reply=reply) as up, \
            proxied(store_path, settings_for((fault_uri(up), 3), schedule="early", budget="calls=2"), judge) as p:
        text, result, run_id = ask(p)
        calls = verifier_calls(p, run_id)
    assert calls == judge.judged == 2
    steps = result["budget"]["steps"]
    assert [s["step"] for s in steps] == ["score", "score", "skipped", "skipped"]
    assert steps[2]["added"] == "candidate 2 scored pointwise on 1 criterion" and "needs 1 and 0 is left" in steps[2]["why"]
    last = result["ranking"][-1]
    assert last["id"] == "candidate-2" and last["score"] is None and text in replies[:2]
    assert ("score skipped", 2) in [(e["event"], e["index"]) for e in result["events"]]


def test_a_cached_score_is_free_under_the_budget(store_path: Path, joint_off) -> None:
    """TEST DOUBLE verifier (logic): the same request again is answered from the store and costs nothing."""
    judge = Judge()
    with FaultServer(chat_reply=lambda body: REPLIES[index_of(body)]) as up, \
            proxied(store_path, settings_for((fault_uri(up), 3), schedule="early", budget="calls=7"), judge) as p:
        _, first, _ = ask(p)
        asked = judge.judged
        _, again, _ = ask(p)
    assert asked == first["budget"]["spent"] <= 7
    assert judge.judged == asked and again["budget"]["spent"] == 0  # cache hits do not count


@pytest.mark.parametrize("budget,smallest", [("calls=1", "calls=2"), ("tokens=10", "tokens=")])
def test_serve_refuses_a_budget_too_small_for_one_comparison(tmp_path: Path, budget: str, smallest: str) -> None:
    from veriscale.cli import app

    (tmp_path / "config.toml").write_text("")
    with FaultServer() as model:
        r = CliRunner().invoke(app, ["--config", str(tmp_path / "config.toml"), "serve", "--store",
                                     str(tmp_path / "s.sqlite3"), "--model", f"{model.url}#fault-model",
                                     "--proxy-n", "3", "--proxy-budget", budget])
        asked = [q for q in model.requests if q["path"].endswith("/chat/completions")]
    assert r.exit_code == 2, r.output
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in r.output, r.output
    assert f"--proxy-budget {budget} cannot pay for one comparison" in lines[0]
    assert f"the smallest budget that works here is --proxy-budget {smallest}" in lines[0]
    assert len(asked) <= 1  # the verifier's probe at most: no comparison was paid for
    Store.open(tmp_path / "s.sqlite3")  # the store is intact
