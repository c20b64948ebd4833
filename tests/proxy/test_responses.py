"""OpenAI Responses in front (Codex's API): the official openai SDK and its stream helper.

Text comes from the real llama.cpp tools server; function calls and their follow-ups from a
FaultServer scripted to call ``bash`` until it sees the tool's output, whose captured request
bodies show what the proxy translated the Responses input into.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
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

TEXT_EVENTS = ["response.created", "response.in_progress", "response.output_item.added",
               "response.content_part.added", "response.output_text.delta", "response.output_text.done",
               "response.content_part.done", "response.output_item.done", "response.completed"]
BASH = {"type": "function", "name": "bash", "description": "Run a shell command",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}
ARGS = {"cmd": "ls"}


def calls_until_tool_output(body: dict[str, Any]) -> Any:
    """The upstream double: a bash call, then (once a tool result is in the conversation) a text."""
    if any(m["role"] == "tool" for m in body["messages"]):
        return "The folder holds two files."
    return tool_reply("bash", ARGS, call_id="call_7")


@pytest.mark.server
def test_output_text_and_the_exact_stream_of_events(store_path: Path, verifier, tools_uri: str) -> None:
    with proxied(store_path, settings_for((tools_uri, 2)), verifier) as p:
        client = p.openai()
        raw = client.responses.with_raw_response.create(model="codex-model", input="Say hello in three words.",
                                                        instructions="Be brief.", max_output_tokens=12, temperature=0)
        resp = raw.parse()
        result = p.run(raw.headers["x-veriscale-run"]).result
        winner = result["candidates"][result["winner"]]["reply"]
        assert resp.output_text and resp.output_text == winner["text"]
        assert resp.status == "completed" and resp.id.startswith("resp_") and resp.model == "codex-model"
        assert [item.type for item in resp.output] == ["message"] and resp.usage.input_tokens > 0
        sent = p.store.run(int(raw.headers["x-veriscale-run"])).args
        assert sent["api"] == "responses" and sent["messages"] == 2  # instructions became the system message

        with client.responses.stream(model="codex-model", input="Say hello in three words.", instructions="Be brief.",
                                     max_output_tokens=12, temperature=0) as stream:
            events = list(stream)
            final = stream.get_final_response()
        kinds = [e.type for e in events]
        assert [k for i, k in enumerate(kinds) if k != kinds[i - 1]] == TEXT_EVENTS  # the text in one or more deltas
        numbers = [e.sequence_number for e in events]
        assert numbers == list(range(len(events))), numbers
        assert events[-1].response.id == events[0].response.id == final.id != resp.id
        assert events[0].response.status == "in_progress" and events[-1].response.status == "completed"
        streamed = p.wait_finished("proxy responses")
        text = streamed.result["candidates"][streamed.result["winner"]]["reply"]["text"]
        delta = next(e for e in events if e.type == "response.output_text.delta")
        assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == text == final.output_text
        added = next(e for e in events if e.type == "response.output_item.added")
        assert added.item.id == events[-2].item.id == delta.item_id  # one message item, opened and closed


def test_function_tools_give_a_function_call_and_its_output_is_translated_back(store_path: Path, verifier) -> None:
    with FaultServer(chat_reply=calls_until_tool_output) as up, \
            proxied(store_path, settings_for((fault_uri(up), 2)), verifier) as p:
        client = p.openai()
        first = client.responses.create(model="m", input="List the files.", tools=[BASH])
        (item,) = first.output
        assert item.type == "function_call" and item.name == "bash" and item.call_id == "call_7"
        assert json.loads(item.arguments) == ARGS and first.output_text == ""
        upstream_tools = chat_requests(up)[0]["body"]["tools"]
        assert upstream_tools == [{"type": "function", "function": {
            "name": "bash", "description": "Run a shell command", "parameters": BASH["parameters"]}}]

        with client.responses.stream(model="m", input="List the files.", tools=[BASH]) as stream:
            kinds = [e.type for e in stream]
            final = stream.get_final_response()
        assert kinds[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
        assert "response.function_call_arguments.delta" in kinds and kinds[-1] == "response.completed"
        assert final.output[0].type == "function_call" and json.loads(final.output[0].arguments) == ARGS

        up.requests.clear()
        follow = client.responses.create(model="m", previous_response_id=first.id, tools=[BASH], input=[
            {"type": "function_call_output", "call_id": "call_7", "output": "a.txt\nb.txt"}])
        assert follow.output_text == "The folder holds two files."
        messages = chat_requests(up)[0]["body"]["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
        assert messages[0]["content"] == "List the files."
        assert messages[1]["tool_calls"][0]["id"] == "call_7"
        assert messages[2] == {"role": "tool", "tool_call_id": "call_7", "content": "a.txt\nb.txt"}

        up.requests.clear()
        whole = client.responses.create(model="m", tools=[BASH], input=[
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List the files."}]},
            {"type": "function_call", "call_id": "call_9", "name": "bash", "arguments": json.dumps(ARGS)},
            {"type": "function_call_output", "call_id": "call_9", "output": "c.txt"}])
        assert whole.output_text == "The folder holds two files."
        messages = chat_requests(up)[0]["body"]["messages"]
        assert messages[1]["role"] == "assistant" and not messages[1]["content"]  # null, or "" for llama.cpp
        assert messages[1]["tool_calls"] == [
            {"id": "call_9", "type": "function", "function": {"name": "bash", "arguments": json.dumps(ARGS)}}]
        assert messages[2] == {"role": "tool", "tool_call_id": "call_9", "content": "c.txt"}

        with pytest.raises(openai.BadRequestError) as unknown:
            client.responses.create(model="m", previous_response_id="resp_nobody", input="go on")
        assert "resp_nobody" in unknown.value.message and unknown.value.body["param"] == "previous_response_id"
