"""A model behind Anthropic's Messages API, read by sampling. The upstream is a recording double
of the Messages endpoint (named as such); its reply shape is checked by the real ``anthropic``
SDK from PyPI, which must parse it, before veriscale is pointed at it."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import cycle

import pytest

from veriscale.engine.store import Store
from veriscale.errors import UserError
from veriscale.models.base import Message, ScoreRequest
from veriscale.models.uri import load_backend
from veriscale.verify.reward import Verifier

class MessagesDouble:
    """Answers POST /v1/messages with the next of ``texts`` and records each body."""

    def __init__(self, texts: list[str]) -> None:
        self.bodies: list[dict] = []
        self.headers: list[dict] = []
        texts_cycle = cycle(texts)
        double = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                double.bodies.append(body)
                double.headers.append(dict(self.headers))
                reply = {"id": f"msg_{len(double.bodies)}", "type": "message", "role": "assistant",
                         "model": body["model"], "content": [{"type": "text", "text": next(texts_cycle)}],
                         "stop_reason": "max_tokens", "stop_sequence": None,
                         "usage": {"input_tokens": 21, "output_tokens": 1}}
                raw = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def double(monkeypatch):
    srv = MessagesDouble(["A", " B", "A.", "sure"])
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.url)
    yield srv
    srv.close()


def test_the_real_sdk_parses_the_double(double):
    from anthropic import Anthropic

    msg = Anthropic(base_url=double.url, api_key="test-key").messages.create(
        model="claude-x", max_tokens=3, messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Grade:"}])
    assert msg.content[0].text == "A" and msg.usage.input_tokens == 21


def test_a_sampled_read_through_the_messages_api(double):
    model = load_backend("anthropic:claude-x?sample=8")
    assert model.read_plan().describe() == "sampled, prefilled (messages, sample=8)"
    req = ScoreRequest(messages=(Message("system", "You grade."), Message("user", "Grade it A-C.")),
                       prefill="Grade: ", labels=("A", "B", "C"))
    resp = model.score(req)
    assert resp.strategy == "sampled" and resp.samples == 8
    assert resp.label_probs == {"A": pytest.approx(4 / 6), "B": pytest.approx(2 / 6), "C": 0.0}
    assert resp.label_mass == pytest.approx(6 / 8) and resp.prompt_tokens == 8 * 21
    body = double.bodies[-1]
    assert body["system"] == "You grade." and body["temperature"] == 1.0
    assert body["messages"][-1] == {"role": "assistant", "content": "Grade:"}  # prefilled, no trailing space
    assert double.headers[-1]["x-api-key"] == "test-key" and double.headers[-1]["anthropic-version"] == "2023-06-01"


def test_a_verdict_carries_the_standard_error(double, tmp_path):
    model = load_backend("anthropic:claude-x?sample=4")
    res = Verifier(model, store=Store.open(tmp_path / "s.sqlite3"), scale="letters:3", criteria="general",
                   injection_detect=False).score("Say A.", "A")
    d = res.to_dict()
    assert d["read_strategies"] == ["sampled"] and d["reward_se"] is not None and d["reward_se"] > 0


def test_no_key_or_too_few_draws_is_one_sentence(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(UserError, match="ANTHROPIC_API_KEY"):
        load_backend("anthropic:claude-x")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    with pytest.raises(UserError, match="too few draws"):
        load_backend("anthropic:claude-x?sample=1")
