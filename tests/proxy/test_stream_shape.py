"""What each API's stream looks like after the pick, through the official SDKs: the winner comes
in several deltas (text and tool arguments) whose accumulation equals the non-streamed reply;
Anthropic's ``message_start`` counts the input; a Responses reply cut by ``max_output_tokens``
is ``incomplete`` (and its stream ends ``response.incomplete``); a failed Responses stream
raises ``openai.APIError``.

The upstream is a FaultServer with a scripted reply (one candidate: the stream's shape, not the
pick, is under test); the verifier is a FaultServer with logprobs (it answers the start-up probe).
"""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest

from tests.proxy.conftest import BASH, fault_uri, proxied, settings_for
from tests.support.fault_server import FaultServer
from veriscale.models.uri import load_backend

TEXT = "Run the tests first, then read the whole diff before you push it."
ARGS = {"cmd": "pytest -q tests/proxy && git diff --stat"}
REPLY = {"content": TEXT, "tool_calls": [{"id": "call_1", "type": "function",
                                          "function": {"name": "bash", "arguments": json.dumps(ARGS)}}]}
ANTHROPIC_BASH = {"name": "bash", "description": "Run a shell command",
                  "input_schema": BASH["function"]["parameters"]}


@pytest.fixture()
def proxy(store_path: Path):
    with FaultServer() as judge, FaultServer(chat_reply=REPLY) as up, \
            proxied(store_path, settings_for((fault_uri(up), 1)), load_backend(f"{judge.url}?retries=0#judge")) as p:
        p.upstream = up
        yield p


def test_chat_completions_streams_text_and_arguments_in_pieces_that_add_up(proxy) -> None:
    client, ask = proxy.openai(), dict(model="m", messages=[{"role": "user", "content": "check"}], tools=[BASH])
    whole = client.chat.completions.create(**ask).choices[0].message
    chunks = list(client.chat.completions.create(**ask, stream=True))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    texts = [d.content for d in deltas if d.content]
    args = [t.function.arguments for d in deltas for t in d.tool_calls or [] if t.function.arguments]
    assert len(texts) > 5 and "".join(texts) == TEXT == whole.content
    assert len(args) > 2 and json.loads("".join(args)) == ARGS == json.loads(whole.tool_calls[0].function.arguments)
    with client.chat.completions.stream(**ask) as stream:  # the SDK's own accumulation
        final = stream.get_final_completion().choices[0].message
    assert final.content == whole.content and final.tool_calls[0].function.arguments == whole.tool_calls[0].function.arguments


def test_responses_streams_text_and_arguments_in_pieces_that_add_up(proxy) -> None:
    client = proxy.openai()
    tools = [{"type": "function", "name": "bash", "description": "Run a shell command",
              "parameters": BASH["function"]["parameters"]}]
    whole = client.responses.create(model="m", input="check", tools=tools)
    events = list(client.responses.create(model="m", input="check", tools=tools, stream=True))
    texts = [e.delta for e in events if e.type == "response.output_text.delta"]
    args = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert len(texts) > 5 and "".join(texts) == TEXT == whole.output_text
    assert len(args) > 2 and "".join(args) == whole.output[1].arguments
    with client.responses.stream(model="m", input="check", tools=tools) as stream:
        final = stream.get_final_response()
    assert final.status == whole.status == "completed" and final.output_text == whole.output_text
    assert [(o.type, getattr(o, "arguments", None)) for o in final.output] == \
        [(o.type, getattr(o, "arguments", None)) for o in whole.output]


def test_anthropic_streams_in_pieces_and_message_start_counts_the_input(proxy) -> None:
    client = proxy.anthropic()
    ask = dict(model="m", max_tokens=64, messages=[{"role": "user", "content": "check"}], tools=[ANTHROPIC_BASH])
    whole = client.messages.create(**ask)
    with client.messages.stream(**ask) as stream:
        events = list(stream)
        final = stream.get_final_message()
    start = next(e for e in events if e.type == "message_start")
    assert start.message.usage.input_tokens == whole.usage.input_tokens == 50  # the upstream's count, not 0
    texts = [e.delta.text for e in events if e.type == "content_block_delta" and e.delta.type == "text_delta"]
    parts = [e.delta.partial_json for e in events if e.type == "content_block_delta" and e.delta.type == "input_json_delta"]
    assert len(texts) > 5 and "".join(texts) == TEXT and len(parts) > 2 and json.loads("".join(parts)) == ARGS
    assert [b.to_dict() for b in final.content] == [b.to_dict() for b in whole.content]
    assert final.usage.to_dict() == whole.usage.to_dict() and final.stop_reason == whole.stop_reason == "tool_use"


def test_a_responses_reply_cut_by_max_output_tokens_is_incomplete(store_path: Path) -> None:
    with FaultServer() as judge, FaultServer(chat_reply={"content": "One two three", "finish_reason": "length"}) as up, \
            proxied(store_path, settings_for((fault_uri(up), 1)), load_backend(f"{judge.url}?retries=0#judge")) as p:
        client = p.openai()
        whole = client.responses.create(model="m", input="count", max_output_tokens=16)
        events = list(client.responses.create(model="m", input="count", max_output_tokens=16, stream=True))
    assert whole.status == "incomplete" and whole.incomplete_details.reason == "max_output_tokens"
    last = events[-1]
    assert last.type == "response.incomplete" and "response.completed" not in [e.type for e in events]
    assert last.response.status == "incomplete" and last.response.incomplete_details.reason == "max_output_tokens"
    assert last.response.output_text == whole.output_text == "One two three"


def test_a_failed_responses_stream_raises_openai_api_error(store_path: Path) -> None:
    with FaultServer() as judge, FaultServer(chat_reply="unused") as up, \
            proxied(store_path, settings_for((fault_uri(up), 1)), load_backend(f"{judge.url}?retries=0#judge")) as p:
        up.queue("500")
        with pytest.raises(openai.APIError, match="every upstream candidate failed") as raised:
            with p.openai().responses.stream(model="m", input="fail") as stream:
                for _ in stream:
                    pass
    assert type(raised.value) is openai.APIError and raised.value.body["code"] == "server_error"
