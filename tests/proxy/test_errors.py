"""Bad requests and dead upstreams: each API answers in its own error shape, within the timeout.

The verifier is a FaultServer (it answers the start-up probe; these requests never reach it).
"""

from __future__ import annotations

import json

import socket
from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from tests.proxy.conftest import fault_uri, proxied, settings_for
from tests.support.fault_server import FaultServer
from veriscale.models.uri import load_backend

HI = [{"role": "user", "content": "hi"}]
TIMEOUT_S = 3.0


@pytest.fixture()
def judge() -> Iterator[object]:
    with FaultServer() as srv:
        yield load_backend(f"{srv.url}?retries=0#judge")


def closed_port_uri() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1#gone"


def test_malformed_and_incomplete_requests_get_each_apis_400(store_path: Path, judge) -> None:
    with FaultServer(chat_reply="never") as up, proxied(store_path, settings_for((fault_uri(up), 2)), judge) as p:
        for path in ("/v1/chat/completions", "/v1/responses"):
            r = httpx.post(p.url + path, content=b'{"model": "m", "messages": [', headers={"content-type": "application/json"})
            assert r.status_code == 400, r.text
            assert r.json() == {"error": {"message": "the body is not valid JSON", "type": "invalid_request_error",
                                          "param": None, "code": None}}
        for path in ("/v1/messages", "/v1/messages/count_tokens"):
            r = httpx.post(p.url + path, content=b"{oops", headers={"content-type": "application/json"})
            assert r.status_code == 400
            assert r.json() == {"type": "error", "error": {"type": "invalid_request_error",
                                                           "message": "the body is not valid JSON"}}

        # A number no JSON writer can write back is refused at the door: the Responses route echoes
        # `tools`, and every route forwards the body upstream.
        out_of_range = (b'{"model": "m", "input": "hi", "max_output_tokens": 8, '
                        b'"tools": [{"type": "custom", "name": "t", "value": 1E400}]}')
        sent = len(up.requests)
        for path, body in (("/v1/responses", out_of_range),
                           ("/v1/chat/completions", b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": NaN}'),
                           ("/v1/messages", b'{"model": "m", "max_tokens": 8, "messages": [], "x": -Infinity}')):
            r = httpx.post(p.url + path, content=body, headers={"content-type": "application/json"})
            assert r.status_code == 400, (path, r.text)
            message = r.json()["error"]["message"]
            assert message.startswith("the body holds ") and message.count(". ") == 0, message
            assert ("1E400" in message) if path == "/v1/responses" else ("Infinity" in message or "NaN" in message)
        assert len(up.requests) == sent  # none of them reached the upstream

        client = p.openai()
        with pytest.raises(openai.BadRequestError) as chat:
            client.chat.completions.create(model="m", messages=[])
        assert chat.value.status_code == 400 and "'messages' must be a non-empty array" in chat.value.message
        assert chat.value.body["type"] == "invalid_request_error" and chat.value.body["param"] == "messages"
        with pytest.raises(openai.BadRequestError) as role:
            client.chat.completions.create(model="m", messages=[{"role": "robot", "content": "hi"}])
        assert "messages[0] needs a 'role'" in role.value.message
        with pytest.raises(openai.BadRequestError) as resp:
            client.responses.create(model="m", input=[])
        assert "no user message" in resp.value.message and resp.value.body["param"] == "input"
        with pytest.raises(openai.BadRequestError) as resp_tokens:
            client.responses.create(model="m", input="hi", max_output_tokens=0)
        assert "'max_output_tokens' must be a positive integer" in resp_tokens.value.message

        claude = p.anthropic()
        with pytest.raises(anthropic.BadRequestError) as no_max:
            claude.post("/v1/messages", cast_to=httpx.Response, body={"model": "m", "messages": HI})
        assert no_max.value.status_code == 400 and "max_tokens: a positive integer is required" in no_max.value.message
        assert no_max.value.body == {"type": "error", "error": {"type": "invalid_request_error",
                                                                "message": "max_tokens: a positive integer is required"}}
        with pytest.raises(anthropic.BadRequestError) as no_messages:
            claude.messages.create(model="m", max_tokens=5, messages=[])
        assert "messages: a non-empty array is required" in no_messages.value.message
        with pytest.raises(anthropic.BadRequestError) as bad_role:
            claude.messages.create(model="m", max_tokens=5, messages=[{"role": "robot", "content": "hi"}])
        assert "messages.0.role" in bad_role.value.message
        assert up.requests == [] and p.store.runs() == []  # refused before any fan-out


def test_every_upstream_down_is_each_apis_502_at_once(store_path: Path, judge) -> None:
    with proxied(store_path, settings_for((closed_port_uri(), 2), timeout_s=TIMEOUT_S), judge) as p:
        with pytest.raises(openai.InternalServerError) as chat:
            p.openai().chat.completions.create(model="m", messages=HI)
        assert chat.value.status_code == 502 and chat.value.body["type"] == "api_error"
        assert "every upstream candidate failed" in chat.value.message and "cannot reach" in chat.value.message
        with pytest.raises(openai.InternalServerError) as resp:
            p.openai().responses.create(model="m", input="hi")
        assert resp.value.status_code == 502 and "every upstream candidate failed" in resp.value.message
        with pytest.raises(anthropic.InternalServerError) as claude:
            p.anthropic().messages.create(model="m", max_tokens=5, messages=HI)
        assert claude.value.status_code == 502
        assert claude.value.body["type"] == "error" and claude.value.body["error"]["type"] == "api_error"
        assert "every upstream candidate failed" in claude.value.body["error"]["message"]
        runs = p.store.runs()
        assert [r.command for r in runs] == ["proxy anthropic", "proxy responses", "proxy chat"]
        assert all(r.status == "failed" and r.result["how"] == "every candidate failed" and r.result["error"]
                   for r in runs)
        assert all(len(r.result["candidates"]) == 2 for r in runs)
        # at once: each candidate failed on the refused connection, none waited for the timeout
        assert all("deadline" not in r.result["error"] and all("cannot reach" in c["error"] for c in r.result["candidates"])
                   for r in runs), [r.result for r in runs]


def test_a_hanging_upstream_fails_within_the_timeout_streamed_or_not(store_path: Path, judge) -> None:
    """Candidates that never answer are cut at timeout_s; a stream already open ends with its API's error."""
    with FaultServer() as up, \
            proxied(store_path, settings_for((fault_uri(up), 2), timeout_s=TIMEOUT_S), judge) as p:
        up.hold_after(0)  # every candidate request is held unanswered (released after 120 s: a hang guard only)

        def cut(fn) -> None:
            """The client got its error while the upstream had answered nothing: cut at the timeout."""
            before = len(up.completion_requests())
            fn()
            sent = len(up.completion_requests()) - before
            assert sent >= 1 and up.in_flight == len(up.completion_requests()), (sent, up.in_flight)

        def chat() -> None:
            with pytest.raises(openai.InternalServerError) as exc:
                p.openai().chat.completions.create(model="m", messages=HI)
            assert exc.value.status_code == 502 and "deadline" in exc.value.message

        def chat_stream() -> None:
            with pytest.raises(openai.APIError) as exc:
                for _ in p.openai().chat.completions.create(model="m", messages=HI, stream=True):
                    pass
            assert "every upstream candidate failed" in exc.value.message and exc.value.body["type"] == "api_error"

        def responses_stream() -> None:
            events = []
            with pytest.raises(openai.APIError, match="every upstream candidate failed"), \
                    p.openai().responses.stream(model="m", input="hi") as stream:
                for event in stream:
                    events.append(event)
            assert [e.type for e in events] == ["response.created", "response.in_progress"]  # then response.failed raised
            raw = httpx.post(p.url + "/v1/responses", json={"model": "m", "input": "hi again", "stream": True}, timeout=60)
            failed = json.loads(raw.text.rstrip().rsplit("data: ", 1)[1])
            assert failed["type"] == "response.failed" and failed["sequence_number"] == 2
            assert failed["response"]["status"] == "failed" and "every upstream candidate failed" in \
                failed["response"]["error"]["message"] == failed["error"]["message"]

        def anthropic_stream() -> None:
            with pytest.raises(anthropic.APIStatusError) as exc, \
                    p.anthropic().messages.stream(model="m", max_tokens=5, messages=HI) as stream:
                for _ in stream:
                    pass
            assert exc.value.body["error"]["type"] == "api_error"
            assert "every upstream candidate failed" in exc.value.body["error"]["message"]

        for check in (chat, chat_stream, responses_stream, anthropic_stream):
            cut(check)  # it did wait for the upstream (the requests reached it), and gave up on the deadline
        assert all(r.status == "failed" and "deadline" in r.result["error"] for r in p.store.runs())
