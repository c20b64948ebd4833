"""Structured concurrency in the gateway: a set-up error cancels the siblings and every outcome
is recorded; a deadline stops the work itself; one limiter per endpoint per process; store
writes off the loop; the model-id probe over the async client; the async public API."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from tests.support.fault_server import FaultServer
from tests.support.scripted_model import ScriptedScoreModel
from veriscale import acompare, ascore, compare, score
from veriscale.engine.sync_facade import CallExecutor, PlannedCall
from veriscale.engine.gateway import Gateway
from veriscale.engine.store import Store
from veriscale.errors import UserError
from veriscale.models.base import Message, ScoreRequest
from veriscale.models.cancel import Stopped, in_worker
from veriscale.models.openai_compat import OpenAICompatModel
from veriscale.models.uri import load_backend
from veriscale.verify.reward import Verifier

GUARD_S = 120  # a hang guard only: every wait below ends on an event long before it


def _request(text: str) -> ScoreRequest:
    return ScoreRequest(messages=(Message("user", f"## Response\n{text}\n## Criterion\nX"),),
                        prefill="Grade:", labels=("A", "B", "C"))


class _SetUpErrorAmongHangingCalls(ScriptedScoreModel):
    """The call for 'bad' raises a set-up error once the others are running; the others wait forever."""

    def __init__(self, n_hanging: int) -> None:
        super().__init__()
        self.n_hanging = n_hanging
        self.started: list[str] = []
        self.cancelled: list[str] = []

    async def ascore(self, request: ScoreRequest):
        text = self._slot_text(request).strip()
        self.started.append(text)
        if text == "bad":
            while len(self.started) < self.n_hanging + 1:
                await asyncio.sleep(0.01)
            raise UserError("the prompt is longer than the context: shorten it")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.append(text)
            raise


def test_a_set_up_error_cancels_the_siblings_and_every_outcome_is_recorded(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite3")
    run = store.start_run("score", "scripted", {})
    model = _SetUpErrorAmongHangingCalls(n_hanging=3)
    ex = CallExecutor(model, store, prompt_version="t", run_id=run, concurrency=8)
    with pytest.raises(UserError, match="longer than the context"):
        ex.run([PlannedCall(_request(t)) for t in ("one", "bad", "two", "three")])
    assert sorted(model.cancelled) == ["one", "three", "two"]
    records = {store.call(c["key"])["request"]["messages"][0]["content"].split("\n")[1]: store.call(c["key"])
               for c in store.run_calls(run)}
    assert set(records) == {"one", "bad", "two", "three"}  # the call that raised has its record too
    assert "longer than the context" in records["bad"]["error"]
    assert all(records[t]["status"] == "cancelled" and records[t]["error"].startswith("cancelled")
               for t in ("one", "two", "three"))


class _Interruptible(ScriptedScoreModel):
    """Works in a worker thread until it is told to stop (as the embedded model does between tokens)."""

    def __init__(self) -> None:
        super().__init__()
        self.working = threading.Event()
        self.stopped_at_check = threading.Event()

    async def ascore(self, request: ScoreRequest):
        return await in_worker(self._work, request)

    def _work(self, request: ScoreRequest, stop: threading.Event):
        self.working.set()
        if stop.wait(GUARD_S):
            self.stopped_at_check.set()
            raise Stopped()
        return super().score(request)


def test_a_deadline_stops_the_work_before_it_frees_the_slot(tmp_path: Path) -> None:
    model = _Interruptible()
    ex = CallExecutor(model, None, prompt_version="t", deadline_s=0.2)
    (outcome,) = ex.run([PlannedCall(_request("slow"))])
    assert "deadline" in outcome.error
    assert model.stopped_at_check.is_set()  # the worker had stopped when the gateway answered


def test_cancelling_the_caller_stops_the_worker_first(tmp_path: Path) -> None:
    model = _Interruptible()

    async def main() -> None:
        task = asyncio.ensure_future(Gateway(model, None, prompt_version="t").run([PlannedCall(_request("x"))]))
        await asyncio.to_thread(model.working.wait, GUARD_S)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert model.stopped_at_check.is_set()

    asyncio.run(main())


def _two_verifiers_at_once(backend_a, backend_b, n: int, concurrency: int) -> None:
    va = Verifier(backend_a, criteria="general", concurrency=concurrency)
    vb = Verifier(backend_b, criteria="general", concurrency=concurrency)
    threads = [threading.Thread(target=lambda v=v, tag=tag: [v.score(f"task {tag}{i}", "x") for i in range(n)])
               for v, tag in ((va, "a"), (vb, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(GUARD_S)


def test_two_verifiers_in_one_process_share_one_limit_per_endpoint() -> None:
    with FaultServer(delay_s=0.2) as server:
        _two_verifiers_at_once(OpenAICompatModel(server.url, model="fault-model"),
                               OpenAICompatModel(server.url, model="fault-model"), n=2, concurrency=2)
        assert len(server.requests) == 12  # 2 verifiers x 2 tasks x 3 criteria
        assert server.max_in_flight == 2


def test_the_uri_concurrency_is_the_endpoints_cap_over_the_setting() -> None:
    with FaultServer(delay_s=0.1) as server:
        uri = f"{server.url}?concurrency=1#fault-model"
        _two_verifiers_at_once(load_backend(uri), load_backend(uri), n=1, concurrency=4)
        assert len(server.requests) == 6 and server.max_in_flight == 1


def test_store_writes_happen_on_the_store_writer_thread_not_the_loop(tmp_path: Path, monkeypatch) -> None:
    store = Store.open(tmp_path / "s.sqlite3")
    threads: list[str] = []
    put = store.put_call
    monkeypatch.setattr(store, "put_call", lambda *a, **kw: (threads.append(threading.current_thread().name), put(*a, **kw))[1])
    CallExecutor(ScriptedScoreModel(), store, prompt_version="t").run([PlannedCall(_request(t)) for t in "abc"])
    assert threads == ["veriscale-store-writer"] * 3 and store.count_calls("ok") == 3


def test_the_model_id_probe_uses_the_async_client(monkeypatch) -> None:
    with FaultServer() as server:
        model = OpenAICompatModel(server.url)  # no #model: the gateway asks the server for its id
        monkeypatch.setattr(model._client, "get", lambda *a, **kw: pytest.fail("a blocking probe on the loop"))
        (outcome,) = CallExecutor(model, None, prompt_version="t").run([PlannedCall(_request("x"))])
        assert outcome.error is None and server.requests[0]["body"]["model"] == "fault-model"


def test_the_async_api_gives_the_sync_verdicts_and_runs_concurrently(tmp_path: Path) -> None:
    model = ScriptedScoreModel()

    async def main():
        return await asyncio.gather(ascore("task", "GOOD", model=model),
                                    acompare("task", "GOOD", "bad", model=model, store=str(tmp_path / "s.sqlite3")))

    s, c = asyncio.run(main())
    assert s.reward == score("task", "GOOD", model=model).reward
    again = compare("task", "GOOD", "bad", model=model, store=str(tmp_path / "s.sqlite3"))
    assert c.p_a_wins == again.p_a_wins > 0.5 and again.usage.model_calls == 0


class _Gauge(ScriptedScoreModel):
    """Counts how many of its calls run at once (an async backend)."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0
        self.most = 0
        self._lock = threading.Lock()

    async def ascore(self, request: ScoreRequest):
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            await asyncio.sleep(0.05)
            return self.score(request)
        finally:
            with self._lock:
                self.now -= 1


def test_one_endpoint_limit_holds_across_gateways_on_different_event_loops() -> None:
    backend = _Gauge()

    def one_loop(tag: str) -> None:
        calls = [PlannedCall(_request(f"{tag}{i}")) for i in range(6)]
        asyncio.run(Gateway(backend, None, prompt_version="t", concurrency=2).run(calls))

    threads = [threading.Thread(target=one_loop, args=(tag,)) for tag in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(GUARD_S)
    assert len(backend.calls) == 12 and backend.most == 2
