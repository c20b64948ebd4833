"""The gateway's own contract: cache, budget, run links, composite (two-stage) steps, chat caching,
deadlines and cancellation leaving the store consistent."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.support.scripted_model import ScriptedScoreModel
from veriscale.engine.sync_facade import CallExecutor, PlannedCall
from veriscale.engine.gateway import Gateway
from veriscale.engine.store import Store
from veriscale.errors import BudgetExceeded, ModelCallError
from veriscale.models.base import ChatResponse, Message, ScoreRequest
from veriscale.models.cancel import current_stop
from veriscale.models.twostage import TwoStageModel


def _request(text: str = "GOOD answer") -> ScoreRequest:
    return ScoreRequest(messages=(Message("user", f"## Response\n{text}\n## Criterion\nX"),),
                        prefill="Grade:", labels=("A", "B", "C"))


def test_calls_are_cached_linked_to_the_run_and_counted(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite3")
    run = store.start_run("score", "scripted", {})
    model = ScriptedScoreModel()
    ex = CallExecutor(model, store, prompt_version="t", run_id=run)
    first = ex.run([PlannedCall(_request()), PlannedCall(_request("bad"))])
    again = CallExecutor(model, store, prompt_version="t", run_id=run).run([PlannedCall(_request())])
    assert [o.cache_hit for o in first] == [False, False] and again[0].cache_hit
    assert len(model.calls) == 2 and ex.usage.model_calls == 2
    assert [(c["kind"], c["cache_hit"]) for c in store.run_calls(run)] == [("score", False), ("score", False), ("score", True)]


def test_the_budget_is_checked_before_spending(tmp_path: Path) -> None:
    model = ScriptedScoreModel()
    with pytest.raises(BudgetExceeded, match=r"\(max_calls\) allows 1"):
        CallExecutor(model, None, prompt_version="t", max_calls=1).run([PlannedCall(_request(str(i))) for i in range(3)])
    assert model.calls == []


def test_two_stage_steps_are_gateway_calls_of_their_own(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite3")
    run = store.start_run("score", "twostage", {})
    reasoner, scorer = ScriptedScoreModel(), ScriptedScoreModel()
    ex = CallExecutor(TwoStageModel(reasoner, scorer), store, prompt_version="t", run_id=run)
    (outcome,) = ex.run([PlannedCall(_request())])
    assert outcome.response is not None and outcome.response.reasoning == "scripted analysis"
    assert [c["kind"] for c in store.run_calls(run)] == ["chat", "score"]  # the reasoner's turn, then the scorer's
    assert ex.usage.model_calls == 2
    rerun = store.start_run("score", "twostage", {})
    CallExecutor(TwoStageModel(reasoner, scorer), store, prompt_version="t", run_id=rerun).run([PlannedCall(_request())])
    assert [c["cache_hit"] for c in store.run_calls(rerun)] == [True] and len(scorer.calls) == 1


class _SlowChat(ScriptedScoreModel):
    """TEST DOUBLE: a blocking chat that answers only once its caller has given up on it (the worker's
    stop flag, which the gateway sets when the deadline cancels the call)."""

    def chat(self, messages, **kw) -> ChatResponse:
        stop = current_stop()
        assert stop is not None and stop.wait(600)  # a hang guard only: the deadline sets the flag
        return ChatResponse(content="late")


def test_chat_calls_are_cached_and_a_deadline_fails_the_call_without_a_record(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite3")
    model = ScriptedScoreModel()
    ex = CallExecutor(model, store, prompt_version="t")
    messages = [{"role": "user", "content": "hi"}]
    assert ex.chat(messages).content == "scripted analysis"
    assert ex.chat(messages).content == "scripted analysis" and ex.usage.cache_hits == 1
    slow = CallExecutor(_SlowChat(), store, prompt_version="t", deadline_s=0.2)
    with pytest.raises(ModelCallError, match="deadline"):
        slow.chat([{"role": "user", "content": "slow"}])
    assert store.count_calls("ok") == 1 and store.count_calls("failed") == 1


def test_a_cancelled_call_is_recorded_as_cancelled_and_a_rerun_asks_again(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite3")

    entered = asyncio.Event()

    class Hanging(ScriptedScoreModel):
        async def ascore(self, request):
            entered.set()
            await asyncio.sleep(30)

    async def main() -> None:
        task = asyncio.ensure_future(Gateway(Hanging(), store, prompt_version="t").run([PlannedCall(_request())]))
        await asyncio.wait_for(entered.wait(), 60)  # the call is being sent (a loaded machine may take a while)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    (record,) = list(store.iter_calls())
    assert record["status"] == "cancelled" and record["error"].startswith("cancelled")
    assert store.call(record["key"])["response"] is None and store.get_call(record["key"]) is None
