"""Requests the fuzz suites found crashing the server or the proxies (HTTP 500), each now answered
with a 4xx in its API's own error shape and one sentence. In process, on scripted test doubles."""

from __future__ import annotations

import json

import pytest

from tests.fuzz.test_api import api  # noqa: F401 - the in-process app fixture

DEEP = "[" * 100_000 + "]" * 100_000


def _post(api, path: str, body: str):  # noqa: F811
    return api.client.post(path, content=body.encode(), headers={"content-type": "application/json"})


@pytest.mark.parametrize("path", ["/api/runs?offset=99999999999999999999", "/api/runs/99999999999999999999",
                                  "/api/jobs/99999999999999999999/result"])
def test_ids_and_offsets_past_sqlite_integers_are_refused(api, path):  # noqa: F811
    r = api.client.get(path)
    assert r.status_code == 422 and "\n" not in r.json()["error"], r.text


def test_fastapis_own_refusals_come_in_each_apis_shape(api):  # noqa: F811
    assert api.client.get("/nowhere").json() == {"error": "there is no such route: see /openapi.json for the routes"}
    assert api.client.get("/v1/nowhere").json()["error"]["type"] == "invalid_request_error"
    r = _post(api, "/api/jobs", DEEP)
    assert r.status_code == 400 and "too deep" in r.json()["error"], r.text


@pytest.mark.parametrize("params, word", [
    ({"task": "\ud800 alone", "candidate": "x"}, "unicode"),
    ({"task": "t", "candidate": "x", "criteria": "a\x00b.md"}, "NUL"),
], ids=["surrogate", "nul"])
def test_job_params_that_could_never_be_stored_or_opened_are_refused(api, params, word):  # noqa: F811
    r = _post(api, "/api/jobs", json.dumps({"kind": "score", "params": params}))
    assert r.status_code == 422 and word.lower() in r.json()["error"].lower(), r.text


@pytest.mark.parametrize("path, body, word", [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "stream_options": []}, "stream_options"),
    ("/v1/chat/completions", {"messages": [{"role": "assistant", "content": None, "tool_calls": [7]}]}, "tool_calls"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}, "temperature"),
    ("/v1/responses", {"input": [{"type": "function_call", "arguments": {"a": 1}}]}, "input[0].arguments"),
    ("/v1/responses", {"input": "hi", "stream": "yes"}, "stream"),
    ("/v1/messages", {"max_tokens": 8, "messages": [{"role": "user", "content": "hi"}], "tools": 7}, "tools"),
    ("/v1/messages", {"max_tokens": True, "messages": [{"role": "user", "content": "hi"}]}, "max_tokens"),
], ids=["content-int", "stream-options-list", "tool-call-int", "temperature-text", "arguments-object",
        "stream-text", "tools-int", "max-tokens-bool"])
def test_proxy_bodies_of_the_wrong_shape_get_the_apis_400(api, path, body, word):  # noqa: F811
    r = _post(api, path, json.dumps(body))
    assert r.status_code == 400, r.text
    assert word in r.json()["error"]["message"], r.text


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
def test_proxy_bodies_past_the_json_caps_get_the_apis_400(api, path):  # noqa: F811
    surrogate = '{"max_tokens": 8, "messages": [{"role": "user", "content": "\\ud800"}]}'
    for body, word in ((surrogate, "lone surrogate"), (DEEP, "100 deep"), ('{"max_tokens": %s}' % ("9" * 5000), "characters long")):
        r = _post(api, path, body)
        assert r.status_code == 400 and word in r.json()["error"]["message"], r.text
