"""The server's token guards the proxy APIs, answered in each API's own 401 shape; the client's
token authenticates to the proxy only and never reaches an upstream (which gets its own key,
from the environment).
"""

from __future__ import annotations

from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from tests.proxy.conftest import chat_requests, fault_uri, proxied, settings_for
from tests.support.fault_server import FaultServer
from veriscale.models.uri import load_backend

TOKEN = "s3cret-proxy-token"
UPSTREAM_KEY = "upstream-key-42"
HI = [{"role": "user", "content": "hi"}]


def test_a_token_guards_the_proxy_and_is_never_forwarded(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("VERISCALE_API_KEY", UPSTREAM_KEY)  # the upstreams' own key, read when they are opened
    with FaultServer() as judge_srv, FaultServer(chat_reply="authorised") as up:
        judge = load_backend(f"{judge_srv.url}?retries=0#judge")
        with proxied(store_path, settings_for((fault_uri(up), 2)), judge, token=TOKEN) as p:
            with pytest.raises(openai.AuthenticationError) as chat:
                p.openai(api_key="wrong").chat.completions.create(model="m", messages=HI)
            assert chat.value.status_code == 401 and chat.value.body["code"] == "invalid_api_key"
            assert chat.value.body["type"] == "invalid_request_error" and "token" in chat.value.message
            with pytest.raises(openai.AuthenticationError):
                p.openai(api_key="wrong").responses.create(model="m", input="hi")
            with pytest.raises(anthropic.AuthenticationError) as claude:
                p.anthropic(api_key="wrong").messages.create(model="m", max_tokens=5, messages=HI)
            assert claude.value.body["type"] == "error" and claude.value.body["error"]["type"] == "authentication_error"
            bare = httpx.post(p.url + "/v1/chat/completions", json={"model": "m", "messages": HI})
            assert bare.status_code == 401 and bare.json()["error"]["code"] == "invalid_api_key"
            assert up.requests == [] and p.store.runs() == []  # refused before anything ran

            openai_client = p.openai(api_key=TOKEN)  # sent as Authorization: Bearer
            assert openai_client.chat.completions.create(model="m", messages=HI).choices[0].message.content == "authorised"
            assert openai_client.responses.create(model="m", input="hi there").output_text == "authorised"
            claude_client = p.anthropic(api_key=TOKEN)  # sent as x-api-key
            assert claude_client.messages.create(model="m", max_tokens=5, messages=HI).content[0].text == "authorised"

        upstream = chat_requests(up)
        assert len(upstream) == 3 * 2
        for request in upstream:
            headers = {k.lower(): v for k, v in request["headers"].items()}
            assert not any(TOKEN in v for v in headers.values()), headers
            assert headers["authorization"] == f"Bearer {UPSTREAM_KEY}" and "x-api-key" not in headers
        assert not any(TOKEN in str(v) for r in judge_srv.requests for v in r["headers"].values())
