"""Fuzz the REST API and the three proxy APIs in process: schemathesis cases from the app's own
OpenAPI schema (valid and invalid), and raw bodies mutated from valid ones (deep nesting, 5,000-digit
numbers, lone surrogates, bytes that are not UTF-8, wrong types).

Property: no answer is a 5xx; each 4xx is JSON in the error shape of the API asked (``{"error":
"..."}`` for REST, OpenAI's and Anthropic's objects for the proxies) whose message is one sentence;
a submitted job ends done, or failed with one sentence that is no Python exception's text.
Verdicts come from a scripted test double (``ScriptedScoreModel``), the upstream candidates from a
zero-latency chat double: this suite is about request handling, not judgement.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import given
from hypothesis import strategies as st
from schemathesis.generation import GenerationMode
from starlette.testclient import TestClient

from tests.fuzz.files import encode
from tests.fuzz.guard import bounded, failed, one_sentence_problem, outcome
from tests.fuzz.profile import fuzz_settings
from tests.fuzz.strategies import Gen, dumps, gens
from tests.support.scripted_model import ScriptedScoreModel
from veriscale.engine.store import Store
from veriscale.models.base import ChatResponse
from veriscale.proxy.settings import ProxySettings
from veriscale.proxy.setup import open_proxy
from veriscale.server.app import create_app
from veriscale.server.jobs import JobRunner
from veriscale.server.security import AccessPolicy

SUITE = "api"
EXCEPTION_TEXT = re.compile(r"^[A-Z][A-Za-z]*(Error|Exception|Interrupt|Exit|Warning)\b")


class FlatModel(ScriptedScoreModel):
    """TEST DOUBLE — the scripted scorer for any prompt (the proxy's probe too), and a chat model
    whose two seeds answer differently, so a proxied request is verified and picked."""

    uri = "scripted:fuzz-double"

    def _slot_text(self, request) -> str:
        return request.messages[-1].content

    def chat(self, messages: list[dict[str, Any]], **kw: Any) -> ChatResponse:
        return ChatResponse(content=f"answer {(kw.get('seed') or 0) % 2}", prompt_tokens=3, completion_tokens=2,
                            finish_reason="stop")


@dataclass
class Api:
    app: Any
    client: TestClient
    runner: JobRunner
    root: Path
    cases: Any  # a hypothesis strategy of schemathesis cases


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    root = tmp_path_factory.mktemp("api")
    (root / "task.md").write_text("Sum a list of numbers.\n")
    (root / "a.md").write_text("GOOD return sum(xs)\n")
    (root / "b.md").write_text("return max(xs)\n")
    store = Store.open(root / "store.sqlite3")
    model = FlatModel()
    settings = ProxySettings(candidates=(("upstream", 2),), timeout_s=60.0, progress=False, max_tokens=16)
    service = open_proxy(settings, model, store, load=lambda _uri: model)
    runner = JobRunner(store, model, roots=(root,), workers=1)
    runner.start()
    policy = AccessPolicy.for_bind("127.0.0.1", 8765, token=None, extra_hosts=("testserver",))  # the in-process clients' host
    app = create_app(store, runner, policy, roots=(root,), proxy=service)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    bodies = [schema[path]["POST"] for path in ("/api/jobs", "/v1/chat/completions", "/v1/responses", "/v1/messages",
                                                "/v1/messages/count_tokens")]
    every = [op.ok() for op in schema.get_all_operations()]
    strategies = [op.as_strategy(generation_mode=mode) for op in every for mode in GenerationMode]
    strategies += [op.as_strategy(generation_mode=mode) for op in bodies for mode in GenerationMode]
    with TestClient(app) as client:
        yield Api(app, client, runner, root, st.one_of(strategies))
    runner.stop()


def _message(path: str, body: Any) -> str | None:
    """The error message in the shape of the API ``path`` belongs to, or None when it has no such shape."""
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    if path.startswith("/v1/messages"):
        ok = body.get("type") == "error" and isinstance(error, dict) and isinstance(error.get("type"), str)
        return error.get("message") if ok and isinstance(error.get("message"), str) else None
    if path.startswith("/v1/"):
        ok = isinstance(error, dict) and isinstance(error.get("type"), str)
        return error.get("message") if ok and isinstance(error.get("message"), str) else None
    return error if isinstance(error, str) else None


def check_answer(api: Api, path: str, status: int, headers: Any, body_of, what: str) -> None:
    """The properties of one answer (see the module docstring)."""
    if status >= 500:
        outcome(SUITE, "traceback")
        raise AssertionError(f"HTTP {status} for {what[:500]!r}: {body_of()!r:.1000}")
    if status >= 400:
        message = _message(path, body_of())
        problem = "the error is not in the API's error shape" if message is None else one_sentence_problem(message)
        if problem is not None:
            outcome(SUITE, "traceback")
            raise AssertionError(f"{problem} (HTTP {status}) for {what[:500]!r}: {body_of()!r:.1000}")
        outcome(SUITE, "rejected")
        return
    if path == "/api/jobs" and status == 201:
        _check_job(api, body_of()["id"], what)
    outcome(SUITE, "accepted")


def _check_job(api: Api, job_id: int, what: str) -> None:
    while (job := api.runner.get(job_id))["status"] in ("queued", "running"):
        time.sleep(0.005)
    error = job.get("error")
    if job["status"] == "failed":
        problem = one_sentence_problem(error or "")
        if problem is None and EXCEPTION_TEXT.match(error):
            problem = "the job failed with a Python exception's text"
        if problem is not None:
            outcome(SUITE, "traceback")
            raise AssertionError(f"{problem} for the job of {what[:500]!r}: {error!r:.1000}")


def _json(response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text[:1000]


@fuzz_settings(300, shrink=False)  # schema-built bodies cost ~0.1 s each to generate
@given(data=st.data())
def test_schema_generated_requests_get_answers_or_one_sentence_errors(api, data):
    case = data.draw(api.cases)
    what = f"{case.method} {case.formatted_path} query={case.query!r} body={case.body!r:.300}"
    try:
        with bounded(what):
            response = case.call()
            check_answer(api, case.formatted_path, response.status_code, response.headers, lambda: _json(response), what)
    except AssertionError:
        raise
    except BaseException as exc:  # noqa: BLE001 - a crash in the app, or a hang
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise failed(SUITE, exc, what) from exc


def _valid_body(gen: Gen, route: str, root: Path) -> Any:
    text = gen.text() or "x"
    if route == "/api/jobs":
        kind = gen.choice(["score", "compare", "select", "track"])
        params = {"score": {"task": text, "candidate": gen.text() or "y"},
                  "compare": {"task": text, "a": gen.text() or "a", "b": gen.text() or "b"},
                  "select": {"paths": [str(root / "a.md"), str(root / "b.md")], "task": str(root / "task.md"),
                             "method": gen.choice(["ppt", "round_robin", "knockout", "pointwise", gen.short()]),
                             "seed": gen.number()},
                  "track": {"paths": [str(root / "a.md")], "every": gen.number()}}[kind]
        return {"kind": kind, "params": params}
    if route == "/v1/chat/completions":
        return {"model": "m", "messages": [{"role": gen.choice(["user", "system", "assistant", "tool"]), "content": text}],
                "max_tokens": 8, "temperature": gen.choice([0, 0.7, 2, gen.number()]), "stream": gen.chance(0.3),
                "tools": [{"type": "function", "function": {"name": gen.short(), "parameters": {}}}]}
    if route == "/v1/responses":
        return {"model": "m", "input": text if gen.chance(0.5) else [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]},
            {"type": "function_call_output", "call_id": gen.short(), "output": gen.text()}],
                "instructions": gen.text(), "stream": gen.chance(0.3), "max_output_tokens": 8,
                "tools": [{"type": gen.choice(["function", "custom"]), "name": gen.short() or "t"}]}
    return {"model": "m", "max_tokens": 8, "system": gen.text(), "stream": gen.chance(0.3),
            "messages": [{"role": "user", "content": [{"type": "text", "text": text},
                                                      {"type": "tool_result", "tool_use_id": "t1", "content": gen.text()}]}],
            "tools": [{"name": gen.short() or "t", "input_schema": {"type": "object"}}]}


ROUTES = ["/api/jobs", "/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/messages/count_tokens"]


@fuzz_settings(1500, shrink=False)
@given(gen=gens())
def test_mutated_raw_bodies_get_answers_or_one_sentence_errors(api, gen):
    route = gen.choice(ROUTES)
    body = gen.corrupt(encode(dumps(gen.mutate(_valid_body(gen, route, api.root)))))
    what = f"POST {route} {body[:300]!r}"
    try:
        with bounded(what):
            response = api.client.post(route, content=body, headers={"content-type": "application/json"})
            check_answer(api, route, response.status_code, response.headers, lambda: _json(response), what)
    except AssertionError:
        raise
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise failed(SUITE, exc, what) from exc
