"""OpenAI Chat Completions in front: the official openai SDK against the proxy, real upstreams.

Text and the real tool call come from the llama.cpp tools server (SmolLM2-135M); the streamed
tool call's exact arguments come from a FaultServer scripted to call ``bash``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.proxy.conftest import (
    BASH,
    Proxied,
    chat_requests,
    fault_uri,
    proxied,
    settings_for,
    tool_reply,
)
from tests.support.fault_server import FaultServer

pytestmark = pytest.mark.embedded  # the verifier; tests on the llama.cpp tools server are marked server

HELLO = [{"role": "user", "content": "Say hello in three words."}]
LS = [{"role": "system", "content": "You call tools."}, {"role": "user", "content": "Run the command ls in the shell."}]


def _winner(p: Proxied, run_id: int | str) -> dict:
    result = p.run(run_id).result
    return result["candidates"][result["winner"]]["reply"]


@pytest.mark.server
def test_a_text_reply_is_the_recorded_winner_streamed_or_not(store_path: Path, verifier, tools_uri: str) -> None:
    with proxied(store_path, settings_for((tools_uri, 2)), verifier) as p:
        client = p.openai()
        raw = client.chat.completions.with_raw_response.create(model="my-agent-model", messages=HELLO,
                                                                max_tokens=12, temperature=0)
        completion = raw.parse()
        choice = completion.choices[0]
        winner = _winner(p, raw.headers["x-veriscale-run"])
        assert choice.message.role == "assistant" and choice.message.content and not choice.message.tool_calls
        assert choice.message.content == winner["text"] and choice.finish_reason == winner["finish_reason"]
        assert choice.finish_reason in ("stop", "length")
        assert completion.model == "my-agent-model" and completion.object == "chat.completion"
        assert completion.usage.prompt_tokens > 0 and completion.usage.completion_tokens > 0  # the real upstream's
        assert raw.headers["x-veriscale-pick"] == p.run(raw.headers["x-veriscale-run"]).result["how"]

        stream = client.chat.completions.create(model="my-agent-model", messages=HELLO, max_tokens=12,
                                                temperature=0, stream=True, stream_options={"include_usage": True})
        chunks = list(stream)
        run = p.wait_finished("proxy chat")
        assert run.args["stream"] is True and run.id != int(raw.headers["x-veriscale-run"])
        streamed = _winner(p, run.id)
        with_choices = [c for c in chunks if c.choices]
        assert with_choices[0].choices[0].delta.role == "assistant"
        assert "".join(c.choices[0].delta.content or "" for c in with_choices) == streamed["text"]
        assert [c.choices[0].finish_reason for c in with_choices if c.choices[0].finish_reason] == [streamed["finish_reason"]]
        assert len({c.id for c in chunks}) == 1 and all(c.object == "chat.completion.chunk" for c in chunks)
        assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == streamed["completion_tokens"]


@pytest.mark.server
def test_a_real_model_tool_call_arrives_as_tool_calls_with_json_arguments(store_path: Path, verifier,
                                                                          tools_uri: str) -> None:
    with proxied(store_path, settings_for((tools_uri, 1), max_tokens=48), verifier) as p:  # N = 1: no verification
        raw = p.openai().chat.completions.with_raw_response.create(model="m", messages=LS, tools=[BASH], temperature=0)
        choice = raw.parse().choices[0]
        assert choice.finish_reason == "tool_calls", choice
        (call,) = choice.message.tool_calls
        assert call.type == "function" and call.id and call.function.name.rstrip(":") == "bash"
        assert isinstance(json.loads(call.function.arguments), dict)
        winner = _winner(p, raw.headers["x-veriscale-run"])
        assert winner["tool_calls"][0]["function"]["arguments"] == call.function.arguments
        assert p.run(raw.headers["x-veriscale-run"]).args["tools"] == ["bash"]

        # the agent's next request: its tool-calling turn (content null) and the tool's result
        follow = LS + [{"role": "assistant", "content": None, "tool_calls": [call.model_dump(exclude_none=True)]},
                       {"role": "tool", "tool_call_id": call.id, "content": "a.txt\nb.txt"}]
        again = p.openai().chat.completions.with_raw_response.create(model="m", messages=follow, tools=[BASH],
                                                                    temperature=0, max_tokens=16)
        assert again.parse().choices[0].finish_reason in ("stop", "length", "tool_calls")
        candidates = p.run(again.headers["x-veriscale-run"]).result["candidates"]
        assert all(c["error"] is None for c in candidates), candidates  # the real server took the conversation


def test_a_scripted_tool_call_streams_and_the_sdk_accumulates_it(store_path: Path, verifier) -> None:
    args = {"cmd": "ls -la /tmp", "timeout": 5}
    with FaultServer(chat_reply=tool_reply("bash", args, call_id="call_42")) as up, \
            proxied(store_path, settings_for((fault_uri(up), 2)), verifier) as p:
        client = p.openai()
        plain = client.chat.completions.create(model="m", messages=LS, tools=[BASH])
        (call,) = plain.choices[0].message.tool_calls
        assert plain.choices[0].finish_reason == "tool_calls" and plain.choices[0].message.content is None
        assert (call.id, call.function.name, json.loads(call.function.arguments)) == ("call_42", "bash", args)

        with client.chat.completions.stream(model="m", messages=LS, tools=[BASH]) as stream:
            final = stream.get_final_completion()
        (streamed,) = final.choices[0].message.tool_calls
        assert final.choices[0].finish_reason == "tool_calls"
        assert (streamed.id, streamed.function.name, json.loads(streamed.function.arguments)) == ("call_42", "bash", args)

        by_hand: dict[int, dict] = {}
        for chunk in client.chat.completions.create(model="m", messages=LS, tools=[BASH], stream=True):
            for delta in chunk.choices[0].delta.tool_calls or []:
                slot = by_hand.setdefault(delta.index, {"id": None, "name": "", "arguments": ""})
                slot["id"] = delta.id or slot["id"]
                slot["name"] += (delta.function.name or "") if delta.function else ""
                slot["arguments"] += (delta.function.arguments or "") if delta.function else ""
        assert list(by_hand) == [0] and by_hand[0]["id"] == "call_42" and by_hand[0]["name"] == "bash"
        assert json.loads(by_hand[0]["arguments"]) == args
        sent = chat_requests(up)[0]["body"]
        assert sent["tools"] == [BASH] and sent["messages"] == LS  # the tools reach the upstream unchanged
