"""What each reply says about its own request, through the official SDKs: a Responses object echoes
the request's fields (tools, tool_choice, top_p, instructions, ...) in the final object and in the
stream's ``response.created`` / ``response.completed``; an Anthropic message that ended on one of
the request's ``stop_sequences`` says so (``stop_reason`` "stop_sequence" and the string), streamed
or not; and an Anthropic stream's ``message_start`` counts the input as the reply that is not
streamed does, when the candidates' counts differ and the lower-numbered one comes back last.

The upstreams are FaultServers with scripted replies (vLLM's ``stop_reason`` names the stop
string; ``prompt_tokens`` sets the count); the verifier is the scripted test double (it grades by
the marker GOOD) where a pick runs, a FaultServer with logprobs where none does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.proxy.conftest import BASH, fault_uri, proxied, scripted_verifier, settings_for
from tests.support.fault_server import FaultServer
from veriscale.models.uri import load_backend

RESPONSES_BASH = {"type": "function", "name": "bash", "description": "Run a shell command",
                  "parameters": BASH["function"]["parameters"], "strict": False}
COUNT = [{"role": "user", "content": "Count to 6: 1, 2,"}]


@pytest.fixture()
def judge():
    with FaultServer() as srv:
        yield load_backend(f"{srv.url}?retries=0#judge")


def test_a_response_echoes_the_fields_its_request_set_streamed_or_not(store_path: Path, judge) -> None:
    asked = dict(model="codex", input="List the files.", instructions="Be brief.", tools=[RESPONSES_BASH],
                 tool_choice={"type": "function", "name": "bash"}, top_p=0.25, parallel_tool_calls=False,
                 max_output_tokens=12, max_tool_calls=1, metadata={"task": "t1"}, truncation="disabled")
    with FaultServer(chat_reply="ls") as up, proxied(store_path, settings_for((fault_uri(up), 1)), judge) as p:
        client = p.openai()
        whole = client.responses.create(**asked)
        events = list(client.responses.create(**asked, stream=True))
        plain = client.responses.create(model="codex", input="List the files.")
    created = next(e.response for e in events if e.type == "response.created")
    completed = next(e.response for e in events if e.type == "response.completed")
    for resp in (whole, created, completed):
        assert resp.instructions == "Be brief." and resp.top_p == 0.25 and resp.parallel_tool_calls is False
        assert (resp.tool_choice.type, resp.tool_choice.name) == ("function", "bash")
        assert [(t.type, t.name, t.parameters) for t in resp.tools] == [("function", "bash", BASH["function"]["parameters"])]
        assert (resp.max_output_tokens, resp.max_tool_calls, resp.metadata) == (12, 1, {"task": "t1"})
    assert (plain.tool_choice, plain.tools, plain.parallel_tool_calls, plain.top_p, plain.instructions) == \
        ("auto", [], True, None, None)  # what the request left out: OpenAI's defaults, null for the upstream's
    assert plain.max_output_tokens is None and plain.text.format.type == "text"


def test_a_message_that_ended_on_a_stop_sequence_says_which(store_path: Path, judge) -> None:
    stopped = {"content": "1, 2, ", "stop_reason": "3"}  # vLLM names the stop string it stopped on
    with FaultServer(chat_reply=stopped) as up, proxied(store_path, settings_for((fault_uri(up), 1)), judge) as p:
        client = p.anthropic()
        msg = client.messages.create(model="c", max_tokens=16, messages=COUNT, stop_sequences=["END", "3"])
        with client.messages.stream(model="c", max_tokens=16, messages=COUNT, stop_sequences=["END", "3"]) as stream:
            events = list(stream)
            final = stream.get_final_message()
        unasked = client.messages.create(model="c", max_tokens=16, messages=COUNT)  # "3" is not one it gave
        recorded = p.last_run("proxy anthropic").result["candidates"]
    delta = next(e for e in events if e.type == "message_delta")
    assert (msg.stop_reason, msg.stop_sequence) == ("stop_sequence", "3")
    assert (delta.delta.stop_reason, delta.delta.stop_sequence) == ("stop_sequence", "3")
    assert (final.stop_reason, final.stop_sequence) == ("stop_sequence", "3") and final.content[0].text == "1, 2, "
    assert (unasked.stop_reason, unasked.stop_sequence) == ("end_turn", None)
    assert recorded[0]["reply"]["stop_sequence"] is None and recorded[0]["reply"]["finish_reason"] == "stop"


@pytest.mark.parametrize("schedule", ["round_robin", "early"])
def test_message_start_counts_the_input_as_the_message_that_is_not_streamed(store_path: Path, schedule: str) -> None:
    """Candidate 0 (40 input tokens) comes back after candidate 1 (70) and wins: every count is 40."""
    slow = FaultServer(chat_reply={"content": "GOOD: run pytest.", "prompt_tokens": 40}, delay_s=0.5)
    fast = FaultServer(chat_reply={"content": "Push it.", "prompt_tokens": 70})
    ask = dict(model="c", max_tokens=16, messages=[{"role": "user", "content": "Next step?"}],
               extra_body={"temperature": 0.7})  # sampled, no seed: nothing comes from the cache
    settings = settings_for((fault_uri(slow), 1), (fault_uri(fast), 1), schedule=schedule)
    with slow, fast, proxied(store_path, settings, scripted_verifier()) as p:
        client = p.anthropic()
        whole = client.messages.create(**ask)
        with client.messages.stream(**ask) as stream:
            events = list(stream)
            final = stream.get_final_message()
        streamed = p.wait_finished("proxy anthropic").result
    assert streamed["how"] == "verified" and streamed["schedule"] == schedule
    start = next(e for e in events if e.type == "message_start")
    assert whole.content[0].text == final.content[0].text == "GOOD: run pytest."  # candidate 0 won both
    assert [c["reply"]["prompt_tokens"] for c in streamed["candidates"]] == [40, 70]
    assert start.message.usage.input_tokens == whole.usage.input_tokens == final.usage.input_tokens == 40
