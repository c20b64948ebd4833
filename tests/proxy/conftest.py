"""The proxy APIs served in-process on 127.0.0.1 over a fresh store, with real SDK clients.

    with proxied(store_path, ProxySettings(candidates=((upstream_uri, 3),)), verifier) as p:
        p.openai().chat.completions.create(...)        # the official openai SDK, max_retries=0
        p.anthropic().messages.create(...)             # the official anthropic SDK, max_retries=0
        p.store.run(run_id).result                     # what the proxy recorded for one request

Upstreams are the real llama.cpp tools server (``tools_uri``) or a FaultServer double
(``fault_uri``); the verifier is the embedded model (``verifier``, loaded once a module) or a
FaultServer where a test needs one that fails.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from tests.support.served_app import served
from veriscale.engine.store import RunRecord, Store
from veriscale.proxy.proxied_request import ProxyService
from veriscale.proxy.settings import ProxySettings
from veriscale.proxy.setup import open_proxy
from veriscale.server.app import create_app
from veriscale.server.jobs import JobRunner
from veriscale.server.security import AccessPolicy

BASH = {"type": "function", "function": {
    "name": "bash", "description": "Run a shell command and return its output",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}}


def fault_uri(srv: Any, retries: int = 0) -> str:
    """A FaultServer as an upstream model URI (no retries by default: a queued fault fails that call)."""
    return f"{srv.url}?retries={retries}#fault-model"


def tool_reply(name: str, arguments: dict[str, Any], call_id: str = "call_abc123", text: str = "") -> dict[str, Any]:
    """A FaultServer ``chat_reply``: one tool call in the chat shape."""
    import json

    return {"content": text, "tool_calls": [{"id": call_id, "type": "function",
                                             "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def probe_reply(request: Any) -> Any:
    """The scripted verifier's answer to the proxy's start-up probe (a request that judges no
    response), or None for a real judgement."""
    from veriscale.models.base import ScoreResponse

    user = request.messages[-1].content
    if "## Response" in user or "## First response" in user:
        return None
    return ScoreResponse(label_probs={lab: float(lab == request.labels[0]) for lab in request.labels},
                         label_mass=0.9, unseen_mass=0.0, prompt_tokens=10, prompt_tokens_total=10)


def scripted_verifier() -> Any:
    """TEST DOUBLE: the scripted scorer (grades by the marker GOOD), answering the proxy's start-up probe."""
    from tests.support.scripted_model import ScriptedScoreModel

    class Probed(ScriptedScoreModel):
        def score(self, request):
            return probe_reply(request) or super().score(request)

    return Probed()


def index_of(body: dict[str, Any]) -> int:
    """Which candidate an upstream chat request is: its seed is base + index (``candidates.SEED_STRIDE``)."""
    from veriscale.proxy.fan_out import SEED_STRIDE

    return body["seed"] % SEED_STRIDE


def chat_requests(srv: Any) -> list[dict[str, Any]]:
    """The upstream chat requests a FaultServer received (bodies and headers)."""
    return [r for r in srv.requests if r["path"].endswith("/chat/completions")]


@dataclass
class Proxied:
    url: str
    store: Store
    service: ProxyService
    token: str | None = None

    def openai(self, **kwargs: Any) -> openai.OpenAI:
        kwargs.setdefault("api_key", self.token or "unused")
        return openai.OpenAI(base_url=self.url + "/v1", max_retries=0, timeout=60, **kwargs)

    def anthropic(self, **kwargs: Any) -> anthropic.Anthropic:
        kwargs.setdefault("api_key", self.token or "unused")
        return anthropic.Anthropic(base_url=self.url, max_retries=0, timeout=60, **kwargs)

    def run(self, run_id: int | str) -> RunRecord:
        run = self.store.run(int(run_id))
        assert run is not None, f"no run {run_id} in the store"
        return run

    def last_run(self, command: str) -> RunRecord:
        runs = [r for r in self.store.runs() if r.command == command]
        assert runs, f"no '{command}' run in the store: {[r.command for r in self.store.runs()]}"
        return runs[0]

    def score_calls(self, run_id: int) -> list[dict[str, Any]]:
        return [c for c in self.store.run_calls(run_id) if c["kind"] == "score"]

    def wait_finished(self, command: str, seconds: float = 30.0) -> RunRecord:
        """The newest ``command`` run once it is finished (a stream records it as its last event goes)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            runs = [r for r in self.store.runs() if r.command == command and r.status != "running"]
            if runs:
                return runs[0]
            time.sleep(0.05)
        raise AssertionError(f"no finished '{command}' run after {seconds} s")


@contextmanager
def proxied(store_path: Path, settings: ProxySettings, verifier: Any, *, token: str | None = None) -> Iterator[Proxied]:
    store = Store.open(store_path)
    service = open_proxy(settings, verifier, store)

    def app_for(port: int):
        return create_app(store, JobRunner(store, verifier), AccessPolicy.for_bind("127.0.0.1", port, token=token),
                          proxy=service)

    with served(app_for, health="/api/health") as url:
        yield Proxied(url, store, service, token)


def settings_for(*pools: tuple[str, int], **kwargs: Any) -> ProxySettings:
    """Test defaults: short timeouts, small replies, no progress tracking unless asked."""
    kwargs.setdefault("timeout_s", 60.0)
    kwargs.setdefault("progress", False)
    kwargs.setdefault("max_tokens", 16)
    return ProxySettings(candidates=tuple(pools), **kwargs)


@pytest.fixture(scope="module")
def verifier():
    """The embedded model (real logprobs), loaded once a module."""
    from veriscale.models.uri import load_backend

    return load_backend("embedded")


@pytest.fixture(scope="module")
def tools_uri() -> str:
    """The real llama.cpp server with tool calling (started once a test process)."""
    from tests.support.llama_tools_server import MODEL_ID, tools_server_url

    return f"{tools_server_url()}#{MODEL_ID}"
