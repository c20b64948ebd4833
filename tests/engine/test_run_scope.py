"""The run as a context: current for the calls it makes (across the gateway's threads), always ended."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest
import typer

from tests.support.scripted_model import ScriptedScoreModel
from veriscale.engine.sync_facade import CallExecutor, PlannedCall
from veriscale.engine.run_scope import RunCancelled, Terminated, current_run_id, open_run, recorded_run
from veriscale.engine.store import Store
from veriscale.errors import UserError, setting
from veriscale.models.base import Message, ScoreRequest


class RunSeeingModel(ScriptedScoreModel):
    """Notes the current run each call sees inside the worker thread that runs the backend."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[int | None] = []

    def score(self, request: ScoreRequest):
        self.seen.append(current_run_id())
        return super().score(request)


def _calls(*texts: str) -> list[PlannedCall]:
    return [PlannedCall(ScoreRequest(messages=(Message("user", f"## Response\n{t}\n## Criterion\nc"),), prefill="Score: ",
                                     labels=("A", "B"))) for t in texts]


def test_calls_link_to_the_current_run_from_the_loop_and_its_worker_threads(tmp_path):
    store = Store.open(tmp_path / "s.sqlite3")
    model = RunSeeingModel()
    ex = CallExecutor(model, store, prompt_version="t")
    with recorded_run(store, "score", model.uri, {}) as run:
        ex.run(_calls("GOOD one", "two"))
        ex.run(_calls("GOOD one"))  # a cache hit is linked too
    assert model.seen == [run.id, run.id], "the backend's worker thread inherits the caller's run"
    assert [c["cache_hit"] for c in store.run_calls(run.id)] == [False, False, True]
    assert store.run(run.id).status == "ok" and current_run_id() is None
    ex.run(_calls("three"))  # outside any run: linked to none
    assert len(store.run_calls(run.id)) == 3


def test_two_threads_each_link_to_their_own_run(tmp_path):
    store = Store.open(tmp_path / "s.sqlite3")
    ex = CallExecutor(ScriptedScoreModel(), store, prompt_version="t")  # one gateway, shared
    ids: dict[str, int] = {}
    barrier = threading.Barrier(2)

    def work(name: str) -> None:
        with recorded_run(store, name, "m", {}) as run:
            ids[name] = run.id
            barrier.wait(timeout=60)
            ex.run(_calls(*(f"{name} {k}" for k in range(5))))

    threads = [threading.Thread(target=work, args=(n,)) for n in ("first", "second")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for name, run_id in ids.items():
        keys = {c["key"] for c in store.run_calls(run_id)}
        assert len(keys) == 5
        request_texts = {store.call(k)["request"]["messages"][0]["content"] for k in keys}
        assert all(name in text for text in request_texts), (name, request_texts)


def test_an_async_caller_on_its_own_loop_keeps_its_run(tmp_path):
    store = Store.open(tmp_path / "s.sqlite3")
    model = RunSeeingModel()
    ex = CallExecutor(model, store, prompt_version="t")

    async def request() -> int:
        with recorded_run(store, "proxy chat", "m", {}) as run:
            await ex.arun(_calls("GOOD async"))
            return run.id

    run_id = asyncio.run(request())
    assert model.seen == [run_id] and len(store.run_calls(run_id)) == 1


@pytest.mark.parametrize(("raised", "status", "error"), [
    (UserError(f"the budget ({setting('max_calls')}) allows 0"), "failed", "the budget (\u2039max_calls\u203a) allows 0"),
    (ValueError("broken"), "failed", "broken"),
    (KeyboardInterrupt(), "cancelled", "Ctrl-C"),
    (Terminated(), "cancelled", "SIGTERM"),
    (RunCancelled("cancelled on request"), "cancelled", "cancelled on request"),
])
def test_every_exit_ends_the_run(tmp_path, raised, status, error):
    store = Store.open(tmp_path / "s.sqlite3")
    with pytest.raises(type(raised)):
        with recorded_run(store, "score", "m", {}) as run:
            run.partial["done"] = 3
            raise raised
    rec = store.run(run.id)
    assert rec.status == status and error in rec.result["error"] and rec.result["done"] == 3
    assert rec.finished_at is not None and current_run_id() is None


def test_the_bodys_own_finish_wins_over_a_later_exit(tmp_path):
    store = Store.open(tmp_path / "s.sqlite3")
    with pytest.raises(SystemExit):
        with recorded_run(store, "select", "m", {}) as run:
            run.finish("ok", {"best": 1})
            raise SystemExit(4)  # e.g. the pick was below --min-confidence: the result stands
    assert store.run(run.id).status == "ok" and store.run(run.id).result == {"best": 1}
    with recorded_run(store, "select", "m", {}) as quiet:
        pass
    assert store.run(quiet.id).status == "ok"
    for raised, status in ((typer.Exit(0), "ok"), (typer.Exit(3), "failed"), (SystemExit(2), "failed"),
                           (typer.Abort(), "cancelled")):
        with pytest.raises(type(raised)):
            with recorded_run(store, "race", "m", {}) as run:
                raise raised
        assert store.run(run.id).status == status, raised


def test_a_run_that_outlives_a_block_is_current_only_inside_its_blocks(tmp_path):
    store = Store.open(tmp_path / "s.sqlite3")
    run = open_run(store, "proxy conversation", "m", {})
    assert current_run_id() is None
    with run.current():
        assert current_run_id() == run.id
        assert contextvars.copy_context().run(current_run_id) == run.id
    assert current_run_id() is None and store.run(run.id).status == "running"
    run.finish("ok", {"curves": []})
    assert store.run(run.id).status == "ok"


def test_a_bad_staleness_setting_is_one_sentence_before_any_run(tmp_path, monkeypatch):
    store = Store.open(tmp_path / "s.sqlite3")
    monkeypatch.setenv("VERISCALE_RUN_STALE_S", "soon")
    with pytest.raises(UserError, match="VERISCALE_RUN_STALE_S='soon' is not a positive number of seconds"):
        with recorded_run(store, "score", "m", {}):
            pass
    assert store.runs() == []
