"""A reply is valid or it is a failure: zero label mass, no logprobs at the slot and off-format
replies are failed calls with their reason (reruns ask again), never ok; a deterministic
off-format reply is asked once more in the same run; the budget counts what is spent."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fault_server import FaultServer
from tests.support.scripted_model import ScriptedScoreModel
from veriscale.engine.sync_facade import CallExecutor, PlannedCall
from veriscale.engine.store import Store
from veriscale.errors import BudgetExceeded
from veriscale.models.base import Message, ScoreRequest
from veriscale.models.openai_compat import OpenAICompatModel
from veriscale.models.twostage import TwoStageModel
from veriscale.verify.reward import Verifier


def _request(text: str = "GOOD answer") -> ScoreRequest:
    return ScoreRequest(messages=(Message("user", f"## Response\n{text}\n## Criterion\nX"),),
                        prefill="Grade:", labels=("A", "B", "C"))


def test_a_reply_with_no_label_mass_is_a_failed_call_and_a_rerun_asks_again(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite3")
    off_format = ScriptedScoreModel(mass=0.0)
    (outcome,) = CallExecutor(off_format, store, prompt_version="t").run([PlannedCall(_request())])
    assert outcome.response is None and "no probability on any score label" in outcome.error
    assert "the judge cannot grade this" in outcome.error  # temperature 0, and no other way to ask
    (record,) = list(store.iter_calls())
    assert record["status"] == "failed" and "no probability on any score label" in record["error"]
    assert store.call(record["key"])["response"]["label_mass"] == 0.0  # kept, for a look at what it said

    fixed = ScriptedScoreModel()  # same fingerprint, same key: the rerun asks again instead of reading the failure
    ex = CallExecutor(fixed, store, prompt_version="t")
    (again,) = ex.run([PlannedCall(_request())])
    assert again.error is None and not again.cache_hit and len(fixed.calls) == 1
    assert store.count_calls("ok") == 1 and store.count_calls("failed") == 0


def test_a_reply_without_logprobs_mid_run_fails_that_call_not_the_run(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite3")
    with FaultServer() as server:
        server.queue("ok", "ok", "nologprobs")  # the third call of twelve
        verifier = Verifier(OpenAICompatModel(server.url, model="fault-model", backoff_s=0.01), store=store,
                            criteria="general", concurrency=1)
        result = verifier.compare("task", "a", "b")
        assert result.failed and len(result.errors) == 1 and "no logprobs at the score slot" in result.errors[0]
        assert store.count_calls("ok") == 11 and store.count_calls("failed") == 1
        rerun = verifier.compare("task", "a", "b")
    assert not rerun.failed and rerun.usage.model_calls == 1 and rerun.usage.cache_hits == 11


def test_an_off_format_reply_at_temperature_zero_is_asked_once_more_with_more_top_logprobs(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite3")
    with FaultServer() as server:
        server.queue("nolabel")
        ex = CallExecutor(OpenAICompatModel(server.url, model="fault-model", top_logprobs=20), store, prompt_version="t")
        (outcome,) = ex.run([PlannedCall(_request())])
        assert outcome.error is None and outcome.response.label_mass > 0
        assert [r["body"]["top_logprobs"] for r in server.requests] == [20, 40]
    assert store.count_calls("ok") == 1 and store.count_calls("failed") == 0


def test_a_reply_that_stays_off_format_is_asked_at_most_once_more_then_the_judge_cannot_grade_it(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite3")
    with FaultServer(top={"x": 0.7, "y": 0.3}) as server:
        ex = CallExecutor(OpenAICompatModel(server.url, model="fault-model"), store, prompt_version="t")
        (outcome,) = ex.run([PlannedCall(_request())])
        assert len(server.requests) == 2
    assert outcome.response is None
    assert outcome.error.startswith("the judge cannot grade this: no probability on any score label")
    assert "top_logprobs=40" in outcome.error and store.count_calls("failed") == 1


def test_an_off_format_reply_with_sampled_reasoning_is_not_asked_again_in_the_run(tmp_path: Path) -> None:
    with FaultServer(top={"x": 0.7, "y": 0.3}) as server:
        ex = CallExecutor(OpenAICompatModel(server.url, model="fault-model"), None, prompt_version="t")
        sampled = ScoreRequest(messages=_request().messages, prefill="Grade:", labels=("A", "B"),
                               reasoning=True, temperature=0.7, seed=1)
        (outcome,) = ex.run([PlannedCall(sampled)])
        assert outcome.response is None and "no probability on any score label" in outcome.error
        assert len(server.requests) == 2  # the reasoning and the slot: no second try at a sample


def test_the_budget_counts_both_calls_of_a_two_stage_score(tmp_path: Path) -> None:
    reasoner, scorer = ScriptedScoreModel(), ScriptedScoreModel()
    with pytest.raises(BudgetExceeded, match=r"needs 2 new model calls .*allows 1"):
        CallExecutor(TwoStageModel(reasoner, scorer), None, prompt_version="t", max_calls=1).run([PlannedCall(_request())])
    assert scorer.calls == []
    ex = CallExecutor(TwoStageModel(reasoner, scorer), None, prompt_version="t", max_calls=2)
    (outcome,) = ex.run([PlannedCall(_request())])
    assert outcome.error is None and ex.usage.model_calls == 2


def test_a_failed_call_was_spent_too(tmp_path: Path) -> None:
    model = ScriptedScoreModel()
    model.fail_when = lambda req: "broken" in req.messages[-1].content
    ex = CallExecutor(model, None, prompt_version="t", max_calls=2)
    (failed,) = ex.run([PlannedCall(_request("broken"))])
    assert failed.error == "scripted failure"
    with pytest.raises(BudgetExceeded, match=r"needs 2 new model calls .*allows 1"):
        ex.run([PlannedCall(_request("one")), PlannedCall(_request("two"))])
    assert len(model.calls) == 1
