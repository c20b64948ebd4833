"""The HTTP backend against a real local server that injects faults (tests/support/fault_server.py)."""

import pytest

from tests.support.fault_server import FaultServer
from veriscale.engine.store import Store
from veriscale.errors import ModelCallError, UserError
from veriscale.models.base import Message, ScoreRequest
from veriscale.models.openai_compat import OpenAICompatModel
from veriscale.models.uri import load_backend
from veriscale.verify.reward import Verifier

REQ = ScoreRequest(messages=(Message("user", "grade it"),), prefill="Grade:", labels=("A", "B", "C"))


@pytest.fixture()
def server():
    with FaultServer(timeout_sleep_s=1.5) as srv:
        yield srv


def model(srv, **kw):
    kw.setdefault("backoff_s", 0.01)
    return OpenAICompatModel(srv.url, model="fault-model", **kw)


def test_chat_endpoint_parses_content_top_logprobs(server):
    resp = model(server).score(REQ)
    assert server.requests[-1]["path"].endswith("/chat/completions")
    body = server.requests[-1]["body"]
    assert body["logprobs"] is True and body["top_logprobs"] == 20 and body["max_tokens"] == 1
    assert resp.label_probs["A"] == pytest.approx(0.6 / 0.9)
    assert resp.label_mass == pytest.approx(0.9) and resp.unseen_mass == pytest.approx(0.0, abs=1e-9)


def test_completions_endpoint_with_client_template_prefills_and_parses_legacy_shape(server):
    resp = model(server, template="chatml").score(REQ)
    req = server.requests[-1]
    assert req["path"].endswith("/completions") and not req["path"].endswith("chat/completions")
    assert req["body"]["prompt"].endswith("<|im_start|>assistant\nGrade:")
    assert resp.label_probs["B"] == pytest.approx(0.3 / 0.9)


def test_retries_429_500_and_timeouts_then_succeeds(server):
    server.queue("429", "500", "timeout")
    resp = model(server, timeout_s=0.5, max_retries=4).score(REQ)
    assert len(server.requests) == 4 and resp.label_mass > 0


def test_gives_up_after_retries_with_a_model_call_error(server):
    server.queue("500", "500", "500")
    with pytest.raises(ModelCallError, match="after 3 tries"):
        model(server, max_retries=2).score(REQ)


def test_malformed_logprobs_fail_the_call(server):
    server.queue("malformed")
    with pytest.raises(ModelCallError, match="malformed logprobs"):
        model(server).score(REQ)


def test_no_logprobs_fails_the_call_and_suggests_two_stage(server):
    server.queue("nologprobs")
    with pytest.raises(ModelCallError, match="no logprobs at the score slot.*twostage"):
        model(server).score(REQ)


def test_context_overflow_is_a_user_error_that_teaches_the_context(server):
    server.queue("context")
    m = model(server)
    assert m.context_size() is None  # the fault server does not say
    with pytest.raises(UserError, match="longer than the 8192-token context .*lower budget_tokens"):
        m.score(REQ)
    assert m.context_size() == 8192


def test_unreachable_server_is_a_user_error():
    m = OpenAICompatModel("http://127.0.0.1:9/v1", backoff_s=0.01)
    with pytest.raises(UserError, match="cannot reach"):
        m.fingerprint()


def test_fingerprint_uses_the_model_id_the_server_reports(server):
    m = load_backend(server.url)  # no #model: ask the server
    assert m.fingerprint() == f"http:{server.url}#fault-model read=chat/top-k/first-token/top-logprobs/20"


def test_failed_call_is_recorded_and_the_verdict_says_so(server, tmp_path):
    store = Store.open(tmp_path / "s.sqlite3")
    server.queue(*["500"] * 3)  # the first call fails after its retries
    v = Verifier(model(server, max_retries=2), store=store, criteria="general", concurrency=1)
    res = v.compare("task", "a", "b")
    assert res.failed and res.p_a_wins is None
    assert store.count_calls("failed") == 1 and store.count_calls("ok") == 11
    again = v.compare("task", "a", "b")
    assert not again.failed and again.usage.model_calls == 1 and again.usage.cache_hits == 11


def test_two_stage_reasoner_then_scorer(server):
    from veriscale.models.twostage import TwoStageModel

    m = TwoStageModel(model(server), model(server))
    resp = m.score(REQ)
    assert "analysis" in server.requests[0]["body"]["messages"][-1]["content"].lower()
    assert "Analysis by a reviewer" in server.requests[1]["body"]["messages"][-1]["content"]
    assert resp.label_mass > 0


def test_a_failure_sentence_always_carries_its_reason():
    """Issue 30: a connection reset's sentence ended 'failed after 5 tries: ' with no reason."""
    import httpx

    from veriscale.models.http_transport import HttpTransport
    from tenacity import RetryError

    transport = HttpTransport("http://127.0.0.1:9/v1", api_key=None, timeout_s=1, max_retries=4, backoff_s=0,
                              max_connections=1)
    try:
        class Attempt:
            def __init__(self, exc):
                self._exc = exc

            def exception(self):
                return self._exc

        for exc, words in ((httpx.ReadError(""), "closed the connection without a reply"),
                           (httpx.RemoteProtocolError("Server disconnected"), "Server disconnected")):
            err = transport._failure("http://127.0.0.1:9/v1/completions", RetryError(Attempt(exc)))
            assert str(err).rstrip().endswith(words) or words in str(err), str(err)
            assert not str(err).rstrip().endswith(":")
    finally:
        transport.close()
