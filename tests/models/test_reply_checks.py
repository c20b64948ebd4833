"""Replies are checked against what was asked (issue 30, item 6), against a real local server that
injects faults (tests/support/fault_server.py):

- a reply naming another model than the one asked is a failed call with one sentence, or, with
  ``model_mismatch="note"``, scored with a note; another spelling of the same model is no mismatch;
- an off-format reply asked again with more top_logprobs is a request of its own: its reply is
  stored under the retry's key, the planned call's key is never ok with it, and a rerun is served
  the same verdict from the store;
- a reply without logprobs says whether the server never gives them or drops them now and then.
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.fault_server import FaultServer
from veriscale.settings import source as setting_source
from veriscale.engine.sync_facade import CallExecutor, PlannedCall
from veriscale.engine.replies import retried_key
from veriscale.engine.store import Store, call_key
from veriscale.errors import ModelCallError, UserError
from veriscale.models.anthropic_messages import AnthropicMessagesModel
from veriscale.models.base import Message, ScoreRequest
from veriscale.models.openai_compat import OpenAICompatModel
from veriscale.models.reply_model import same_model
from veriscale.verify.reward import Verifier


def _request(i: int = 0) -> ScoreRequest:
    return ScoreRequest(messages=(Message("user", f"## Response\nanswer {i}\n## Criterion\nX"),),
                        prefill="Grade:", labels=("A", "B", "C"))


def _model(server: FaultServer, **kw) -> OpenAICompatModel:
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("model", "fault-model")
    return OpenAICompatModel(server.url, **kw)


@pytest.fixture(autouse=True)
def _no_chosen_settings(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("VERISCALE_MODEL_MISMATCH", raising=False)
    setting_source.choose({})
    yield
    setting_source.choose({})


# -- another model's reply ---------------------------------------------------------------------------
def test_a_reply_naming_another_model_is_a_failed_call_with_its_reason(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite3")
    with FaultServer() as server:
        server.queue("ok", "othermodel", "ok", "othermodel")
        ex = CallExecutor(_model(server), store, prompt_version="t", concurrency=1)
        outcomes = ex.run([PlannedCall(_request(i)) for i in range(4)])
    failed = [o for o in outcomes if o.error]
    assert len(failed) == 2 and all(o.response is None for o in failed)
    reason = failed[0].error
    assert reason.startswith(f"{server.url} answered with model 'other' although 'fault-model' was asked: ")
    assert "set model_mismatch='note' to accept it" in reason
    assert store.count_calls("ok") == 2 and store.count_calls("failed") == 2


def test_with_model_mismatch_note_another_models_reply_is_scored_with_a_note(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with FaultServer() as server, caplog.at_level(logging.WARNING, logger="veriscale"):
        server.queue("othermodel", "othermodel")
        backend = _model(server, model_mismatch="note")
        outcomes = CallExecutor(backend, None, prompt_version="t", concurrency=1).run(
            [PlannedCall(_request(i)) for i in range(2)])
    assert all(o.error is None and o.response.label_mass > 0 for o in outcomes)
    said = [n for n in backend.read_plan().notes if "answered with model 'other'" in n]
    assert len(said) == 1 and "'fault-model' was asked" in said[0]  # one note, not one a reply
    assert sum("answered with model 'other'" in r.getMessage() for r in caplog.records) == 1


def test_the_setting_reaches_the_backend_from_the_environment_and_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    with FaultServer() as server:
        monkeypatch.setenv("VERISCALE_MODEL_MISMATCH", "note")
        server.queue("othermodel")
        assert _model(server).score(_request()).label_mass > 0
        setting_source.choose({"model_mismatch": "fail"})  # a flag or the config file wins over the environment
        server.queue("othermodel")
        with pytest.raises(Exception, match="answered with model 'other'"):
            _model(server).score(_request())
    monkeypatch.setenv("VERISCALE_MODEL_MISMATCH", "sometimes")
    setting_source.choose({})
    with FaultServer() as server:
        server.queue("othermodel")
        with pytest.raises(UserError, match="VERISCALE_MODEL_MISMATCH='sometimes' is not fail or note"):
            _model(server).score(_request())


@pytest.mark.parametrize("answered", ["fault-model", "fault-model-2024-08-06", "", None])
def test_another_spelling_of_the_model_asked_is_no_mismatch(answered: str | None) -> None:
    with FaultServer() as server:
        server.reply_model = answered
        assert _model(server).score(_request()).label_mass > 0


def test_a_uri_without_a_model_takes_whatever_the_server_names() -> None:
    with FaultServer() as server:
        server.reply_model = "/models/smollm2-135m-instruct-q8_0.gguf"  # llama_cpp.server's model path
        assert _model(server, model=None).score(_request()).label_mass > 0


def test_which_names_are_the_same_model() -> None:
    assert same_model("gpt-4o", "gpt-4o-2024-08-06")
    assert same_model("claude-3-5-sonnet-latest", "claude-3-5-sonnet-20241022")
    assert same_model("llama3", "llama3:latest")
    assert same_model(None, "anything") and same_model("m", None) and same_model("m", "")
    assert not same_model("qwen3-8b", "other")
    assert not same_model("gpt-4o", "gpt-4")


class _MessagesDouble:
    """A recording double of Anthropic's Messages endpoint whose replies name ``answered`` (a test double)."""

    def __init__(self, answered: str) -> None:
        self.answered = answered
        double = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                raw = json.dumps({"id": "msg_1", "type": "message", "role": "assistant", "model": double.answered,
                                  "content": [{"type": "text", "text": "A"}], "stop_reason": "max_tokens",
                                  "stop_sequence": None, "usage": {"input_tokens": 21, "output_tokens": 1}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> "_MessagesDouble":
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_an_anthropic_reply_naming_another_model_is_a_failed_call() -> None:
    with _MessagesDouble("claude-haiku-4-5-20251001") as double:
        m = AnthropicMessagesModel(double.url, "claude-sonnet-4-5", api_key="k", sample=2)
        with pytest.raises(ModelCallError, match="answered with model 'claude-haiku-4-5-20251001' although "
                                                 "'claude-sonnet-4-5' was asked"):
            m.score(_request())
        double.answered = "claude-sonnet-4-5-20250929"  # a dated snapshot of the model asked
        assert m.score(_request()).samples == 2
        double.answered = "claude-haiku-4-5-20251001"
        noted = AnthropicMessagesModel(double.url, "claude-sonnet-4-5", api_key="k", sample=2, model_mismatch="note")
        assert noted.score(_request()).samples == 2
        assert any("claude-haiku-4-5" in n for n in noted.read_plan().notes)


# -- a retry's reply under the retry's own key -----------------------------------------------------
def test_a_retrys_reply_is_stored_under_the_retrys_key_and_a_rerun_gives_the_same_verdict(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite3")
    with FaultServer(varied=True) as server:
        server.queue("nolabel")  # the first call has no label at the slot: asked again with top_logprobs=40
        first = Verifier(_model(server), store=store, criteria="general", concurrency=1).score("task", "a candidate")
        sent = [r["body"].get("top_logprobs") for r in server.requests]
        assert sent[:2] == [20, 40] and not first.failed
        (retried,) = [r for r in first.readings if r.prompt_tokens == 100]  # it carries the cost of both calls
        planned = retried.call_key
        assert store.call(planned) is None or store.call(planned)["status"] != "ok"  # never ok with another's answer
        record = store.call(store.get_meta(retried_key(planned)))  # the retry's own record, under its own key
        assert record["status"] == "ok" and record["response"]["label_probs"] == retried.label_probs
        assert record["prompt_tokens"] == 50  # the retry's own cost, not the pair's

        before = len(server.requests)
        again = Verifier(_model(server), store=store, criteria="general", concurrency=1).score("task", "a candidate")
        assert len(server.requests) == before  # every answer from the store
    assert again.reward == first.reward
    assert [r.label_probs for r in again.readings] == [r.label_probs for r in first.readings]
    assert again.usage.model_calls == 0 and again.usage.cache_hits == len(first.readings)


def test_the_retry_key_is_the_key_of_the_request_sent(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite3")
    with FaultServer() as server:
        backend = _model(server)
        server.queue("nolabel")
        ex = CallExecutor(backend, store, prompt_version="t")
        (call,) = ex.keyed([PlannedCall(_request())])
        (outcome,) = ex.run([call])
        assert outcome.error is None and [r["body"]["top_logprobs"] for r in server.requests] == [20, 40]
        wider = backend.retry_variant()
        assert wider.top_logprobs == 40 and wider.fingerprint() != backend.fingerprint()
        retry_key = call_key(wider.fingerprint(), "t", _request().to_dict())
        assert retry_key != call.key and store.get_meta(retried_key(call.key)) == retry_key
        assert store.call(retry_key)["status"] == "ok" and store.call(call.key) is None
        assert store.count_calls("ok") == 1 and store.count_calls("failed") == 0
        # a backend asked at top_logprobs=40 from the start sends that same request: the same key, a hit
        same = CallExecutor(_model(server, top_logprobs=40), store, prompt_version="t")
        before = len(server.requests)
        (hit,) = same.run([PlannedCall(_request())])
        assert hit.cache_hit and len(server.requests) == before


# -- replies without logprobs ----------------------------------------------------------------------
def test_logprobs_dropped_on_some_replies_say_how_many_of_them(tmp_path: Path) -> None:
    with FaultServer() as server:
        server.queue(*["ok"] * 7, *["nologprobs"] * 3)
        outcomes = CallExecutor(_model(server), None, prompt_version="t", concurrency=1).run(
            [PlannedCall(_request(i)) for i in range(10)])
    errors = [o.error for o in outcomes if o.error]
    assert len(errors) == 3
    assert errors[-1].startswith(f"3 of 10 replies from {server.url} came with no logprobs at the score slot: the "
                                 "server drops them intermittently")
    assert not any("started with logprobs enabled" in e for e in errors)


def test_a_server_that_never_gives_logprobs_is_told_to_start_with_them(tmp_path: Path) -> None:
    with FaultServer() as server:
        server.queue("nologprobs", "nologprobs")
        outcomes = CallExecutor(_model(server), None, prompt_version="t", concurrency=1).run(
            [PlannedCall(_request(i)) for i in range(2)])
    assert all("returned no logprobs at the score slot: use a server started with logprobs enabled" in o.error
               for o in outcomes)
