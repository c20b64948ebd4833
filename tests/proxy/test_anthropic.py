"""Anthropic Messages in front (Claude Code's API): the official anthropic SDK against the proxy.

Text comes from the real llama.cpp tools server; tool use and tool results from a FaultServer
scripted to call ``bash`` until it sees the tool's result, whose captured request bodies show
the translation into the chat shape upstream.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.proxy.conftest import (
    chat_requests,
    fault_uri,
    proxied,
    settings_for,
    tool_reply,
)
from tests.support.fault_server import FaultServer

pytestmark = pytest.mark.embedded  # the verifier; tests on the llama.cpp tools server are marked server

HELLO = [{"role": "user", "content": "Say hello in three words."}]
BASH = {"name": "bash", "description": "Run a shell command",
        "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}
ARGS = {"cmd": "ls -la"}


def calls_until_tool_result(body: dict[str, Any]) -> Any:
    if any(m["role"] == "tool" for m in body["messages"]):
        return "Two files."
    return tool_reply("bash", ARGS, call_id="call_5")


def sse_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) of every event in an SSE body, comments skipped."""
    out = []
    for block in text.split("\n\n"):
        lines = [line for line in block.splitlines() if line and not line.startswith(":")]
        if not lines:
            continue
        name = next(line[7:] for line in lines if line.startswith("event: "))
        data = json.loads(next(line[6:] for line in lines if line.startswith("data: ")))
        assert data["type"] == name, block
        out.append((name, data))
    return out


@pytest.mark.server
def test_text_create_and_stream_in_anthropics_event_order(store_path: Path, verifier, tools_uri: str) -> None:
    with proxied(store_path, settings_for((tools_uri, 2)), verifier) as p:
        client = p.anthropic()
        raw = client.messages.with_raw_response.create(model="claude-x", max_tokens=12, messages=HELLO,
                                                       system="Be brief.", extra_body={"temperature": 0})
        msg = raw.parse()
        result = p.run(raw.headers["x-veriscale-run"]).result
        winner = result["candidates"][result["winner"]]["reply"]
        assert msg.type == "message" and msg.role == "assistant" and msg.model == "claude-x"
        assert [b.type for b in msg.content] == ["text"] and msg.content[0].text == winner["text"]
        assert msg.stop_reason == {"stop": "end_turn", "length": "max_tokens"}[winner["finish_reason"]]
        assert msg.usage.input_tokens > 0 and msg.id.startswith("msg_")

        with client.messages.stream(model="claude-x", max_tokens=12, messages=HELLO, system="Be brief.",
                                    extra_body={"temperature": 0}) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
        streamed = p.wait_finished("proxy anthropic").result
        assert text == final.content[0].text == streamed["candidates"][streamed["winner"]]["reply"]["text"]
        assert final.stop_reason == msg.stop_reason

        body = {"model": "claude-x", "max_tokens": 12, "messages": HELLO, "system": "Be brief.", "temperature": 0,
                "stream": True}
        resp = httpx.post(p.url + "/v1/messages", json=body, timeout=60)
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
        names = [name for name, _ in sse_events(resp.text) if name != "ping"]
        runs = [n for i, n in enumerate(names) if n != names[i - 1]]  # the text in one or more deltas
        assert runs == ["message_start", "content_block_start", "content_block_delta", "content_block_stop",
                        "message_delta", "message_stop"], names
        events = dict(sse_events(resp.text))
        assert events["message_delta"]["delta"]["stop_reason"] == msg.stop_reason
        assert "".join(data["delta"]["text"] for name, data in sse_events(resp.text)
                       if name == "content_block_delta") == text


def test_tool_use_and_a_tool_result_follow_up(store_path: Path, verifier) -> None:
    with FaultServer(chat_reply=calls_until_tool_result) as up, \
            proxied(store_path, settings_for((fault_uri(up), 2)), verifier) as p:
        client = p.anthropic()
        msg = client.messages.create(model="claude-x", max_tokens=64, tools=[BASH], system="You use tools.",
                                     messages=[{"role": "user", "content": "List the files."}])
        assert msg.stop_reason == "tool_use"
        (block,) = msg.content
        assert block.type == "tool_use" and block.name == "bash" and block.input == ARGS
        assert block.id.startswith("toolu_")
        sent = chat_requests(up)[0]["body"]
        assert sent["tools"] == [{"type": "function", "function": {"name": "bash", "description": "Run a shell command",
                                                                  "parameters": BASH["input_schema"]}}]
        assert sent["messages"][0] == {"role": "system", "content": "You use tools."}

        with client.messages.stream(model="claude-x", max_tokens=64, tools=[BASH],
                                    messages=[{"role": "user", "content": "List the files."}]) as stream:
            streamed = stream.get_final_message()
        assert streamed.stop_reason == "tool_use" and streamed.content[0].type == "tool_use"
        assert streamed.content[0].input == ARGS and streamed.content[0].id == block.id

        up.requests.clear()
        follow = client.messages.create(model="claude-x", max_tokens=64, tools=[BASH], messages=[
            {"role": "user", "content": "List the files."},
            {"role": "assistant", "content": [{"type": "text", "text": "Listing."},
                                              {"type": "tool_use", "id": block.id, "name": "bash", "input": ARGS}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block.id,
                                          "content": [{"type": "text", "text": "a.txt\nb.txt"}]}]}])
        assert follow.stop_reason == "end_turn" and follow.content[0].text == "Two files."
        messages = chat_requests(up)[0]["body"]["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
        assert messages[1]["content"] == "Listing."
        assert messages[1]["tool_calls"] == [{"id": block.id, "type": "function",
                                              "function": {"name": "bash", "arguments": json.dumps(ARGS)}}]
        assert messages[2] == {"role": "tool", "tool_call_id": block.id, "content": "a.txt\nb.txt"}

        up.requests.clear()
        client.messages.create(model="claude-x", max_tokens=64, tools=[BASH], messages=[
            {"role": "user", "content": "List the files."},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": ARGS}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True,
                                          "content": "permission denied"}, {"type": "text", "text": "Try again."}]}])
        messages = chat_requests(up)[0]["body"]["messages"]
        assert messages[2:] == [{"role": "tool", "tool_call_id": "toolu_1", "content": "[error] permission denied"},
                                {"role": "user", "content": "Try again."}]


def test_count_tokens_is_a_positive_int_that_grows_with_the_input(store_path: Path, verifier) -> None:
    with FaultServer() as up, proxied(store_path, settings_for((fault_uri(up), 2)), verifier) as p:
        client = p.anthropic()
        short = client.messages.count_tokens(model="claude-x", messages=[{"role": "user", "content": "hi"}])
        long = client.messages.count_tokens(model="claude-x", system="You are careful. " * 20, tools=[BASH],
                                            messages=[{"role": "user", "content": "List every file. " * 30}])
        assert isinstance(short.input_tokens, int) and short.input_tokens > 0
        assert long.input_tokens > short.input_tokens + 100
        assert up.requests == []  # counting is local: no upstream call, no run
        assert [r for r in p.store.runs() if r.command.startswith("proxy")] == []
