"""The sampling and tool fields of each API reach every candidate, or are refused in that API's shape.

Through the official openai and anthropic SDKs against the real proxy: ``stop`` /
``stop_sequences`` really stop the real llama.cpp server's candidates; every other field is
checked in the upstream request a FaultServer records (top_p, top_k, penalties, tool_choice,
response_format / text.format, parallel tool calls); a field no upstream can honour is a 400
``invalid_request_error`` naming it, and nothing is sent upstream. The verifier is the scripted
test double where no verification runs (one candidate, or candidates that agree).
"""

from __future__ import annotations

from pathlib import Path

import anthropic
import openai
import pytest

from tests.proxy.conftest import BASH, chat_requests, fault_uri, proxied, scripted_verifier, settings_for, tool_reply
from tests.support.fault_server import FaultServer
from tests.support.scripted_model import ScriptedScoreModel, registered_scheme

COUNT = [{"role": "user", "content": "Count to 6: 1, 2,"}]  # SmolLM2 at temperature 0: "1, 2, 3\n\n..."
LS = [{"role": "user", "content": "List the files."}]
BASH_ANTHROPIC = {"name": "bash", "description": "Run a shell command",
                  "input_schema": BASH["function"]["parameters"]}
BASH_RESPONSES = {"type": "function", "name": "bash", "description": "Run a shell command",
                  "parameters": BASH["function"]["parameters"]}


def candidate_texts(p, command: str) -> list[str]:
    return [c["reply"]["text"] for c in p.last_run(command).result["candidates"]]


@pytest.mark.embedded
def test_stop_and_stop_sequences_stop_the_real_candidates(store_path: Path, tools_uri: str) -> None:
    with proxied(store_path, settings_for((tools_uri, 2), max_tokens=20), scripted_verifier()) as p:
        plain = p.openai().chat.completions.create(model="m", messages=COUNT, temperature=0, max_tokens=20)
        assert "3" in plain.choices[0].message.content  # without stop the model writes past 3
        cut = p.openai().chat.completions.create(model="m", messages=COUNT, temperature=0, max_tokens=20, stop=["3"])
        assert cut.choices[0].message.content.strip() == "1, 2,"
        assert [t.strip() for t in candidate_texts(p, "proxy chat")] == ["1, 2,", "1, 2,"]  # each candidate stopped
        msg = p.anthropic().messages.create(model="c", max_tokens=20, messages=COUNT, stop_sequences=["3"],
                                            extra_body={"temperature": 0})  # the SDK (2.15) has no keyword for it
        assert msg.content[0].text.strip() == "1, 2,"  # the same chat call as above: from the cache, stop in its key


def test_each_api_sends_its_sampling_and_tool_fields_to_the_upstream(store_path: Path) -> None:
    with FaultServer(chat_reply=tool_reply("bash", {"cmd": "ls"})) as up, \
            proxied(store_path, settings_for((fault_uri(up), 1)), scripted_verifier()) as p:
        p.openai().chat.completions.create(
            model="m", messages=LS, tools=[BASH], tool_choice={"type": "function", "function": {"name": "bash"}},
            top_p=0.5, presence_penalty=0.5, frequency_penalty=0.25, stop="END", response_format={"type": "json_object"})
        body = chat_requests(up)[-1]["body"]
        assert (body["tool_choice"], body["top_p"], body["presence_penalty"], body["frequency_penalty"], body["stop"],
                body["response_format"]) == ({"type": "function", "function": {"name": "bash"}}, 0.5, 0.5, 0.25,
                                             ["END"], {"type": "json_object"})
        p.anthropic().messages.create(model="c", max_tokens=16, messages=LS, tools=[BASH_ANTHROPIC],
                                      tool_choice={"type": "any"}, stop_sequences=["END", "\n\n"],
                                      output_config={"effort": "low", "format": {"type": "json_schema", "schema": {}}},
                                      extra_body={"top_k": 5, "top_p": 0.7})  # the SDK (2.15) has no keywords for these
        body = chat_requests(up)[-1]["body"]
        assert (body["tool_choice"], body["top_k"], body["top_p"], body["stop"], body["response_format"]) == (
            "required", 5, 0.7, ["END", "\n\n"], {"type": "json_schema", "json_schema": {"name": "output", "schema": {}}})
        p.openai().responses.create(model="m", input="List the files.", tools=[BASH_RESPONSES], top_p=0.2,
                                    tool_choice={"type": "function", "name": "bash"},
                                    text={"format": {"type": "json_schema", "name": "files",
                                                     "schema": {"type": "object"}}})
        body = chat_requests(up)[-1]["body"]
        assert (body["tool_choice"], body["top_p"], body["response_format"]) == (
            {"type": "function", "function": {"name": "bash"}}, 0.2,
            {"type": "json_schema", "json_schema": {"name": "files", "schema": {"type": "object"}}})


def test_tool_choice_none_sends_no_tools_and_one_call_is_kept_without_parallel_calls(store_path: Path) -> None:
    two = tool_reply("bash", {"cmd": "ls"})
    two["tool_calls"].append({**two["tool_calls"][0], "id": "call_2"})
    with FaultServer(chat_reply=two) as up, \
            proxied(store_path, settings_for((fault_uri(up), 1)), scripted_verifier()) as p:
        p.openai().chat.completions.create(model="m", messages=LS, tools=[BASH], tool_choice="none")
        assert "tools" not in chat_requests(up)[-1]["body"]
        both = p.openai().chat.completions.create(model="m", messages=LS, tools=[BASH])
        one = p.openai().chat.completions.create(model="m", messages=LS, tools=[BASH], parallel_tool_calls=False)
        assert (len(both.choices[0].message.tool_calls), len(one.choices[0].message.tool_calls)) == (2, 1)
        msg = p.anthropic().messages.create(model="c", max_tokens=16, messages=LS, tools=[BASH_ANTHROPIC],
                                            tool_choice={"type": "auto", "disable_parallel_tool_use": True})
        assert [b.type for b in msg.content] == ["tool_use"]
        resp = p.openai().responses.create(model="m", input="List the files.", tools=[BASH_RESPONSES], max_tool_calls=1)
        assert [item.type for item in resp.output] == ["function_call"]


def test_a_field_the_proxy_cannot_honour_is_refused_in_each_apis_shape(store_path: Path) -> None:
    with FaultServer(chat_reply="hi") as up, \
            proxied(store_path, settings_for((fault_uri(up), 2)), scripted_verifier()) as p:
        with pytest.raises(openai.BadRequestError) as chat:
            p.openai().chat.completions.create(model="m", messages=LS, n=2)
        with pytest.raises(openai.BadRequestError) as logprobs:
            p.openai().chat.completions.create(model="m", messages=LS, logprobs=True, stream=True)
        with pytest.raises(openai.BadRequestError) as responses:
            p.openai().responses.create(model="m", input="hi", background=True)
        with pytest.raises(anthropic.BadRequestError) as messages:
            p.anthropic().messages.create(model="c", max_tokens=8, messages=LS,
                                          extra_body={"mcp_servers": [{"type": "url", "url": "http://x", "name": "x"}]})
        with pytest.raises(openai.BadRequestError) as unknown_tool:
            p.openai().chat.completions.create(model="m", messages=LS, tools=[BASH],
                                               tool_choice={"type": "function", "function": {"name": "rm"}})
        assert not chat_requests(up)  # refused before any candidate ran
    for exc, field in ((chat, "n"), (logprobs, "logprobs"), (responses, "background"), (unknown_tool, "tool_choice")):
        assert exc.value.status_code == 400 and exc.value.body["type"] == "invalid_request_error"
        assert exc.value.body["param"] == field and f"'{field}'" in exc.value.body["message"]
    assert messages.value.status_code == 400 and messages.value.body["error"]["type"] == "invalid_request_error"
    assert "'mcp_servers' is not supported by this proxy" in messages.value.body["error"]["message"]


def test_an_option_the_upstream_model_cannot_take_is_refused_naming_the_field(store_path: Path) -> None:
    """The scripted upstream declares no chat_options: top_p or stop_sequences cannot reach it."""
    with registered_scheme("scripted", lambda uri: ScriptedScoreModel(), ("scripted",)), \
            proxied(store_path, settings_for(("scripted", 2)), scripted_verifier()) as p:
        with pytest.raises(openai.BadRequestError) as chat:
            p.openai().chat.completions.create(model="m", messages=LS, top_p=0.9)
        with pytest.raises(anthropic.BadRequestError) as messages:
            p.anthropic().messages.create(model="c", max_tokens=8, messages=LS, stop_sequences=["3"])
        assert p.openai().chat.completions.create(model="m", messages=LS).choices[0].message.content  # plain works
    assert chat.value.body["param"] == "top_p" and "'top_p' cannot be passed to the upstream model scripted:test-double" \
        in chat.value.body["message"]
    assert "'stop_sequences' cannot be passed" in messages.value.body["error"]["message"]
