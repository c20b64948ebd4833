"""First bytes do not wait for the pick: with a slow upstream, each stream opens at once (an SSE
keep-alive comment for Chat Completions, ``response.created`` for Responses, ``message_start``
for Anthropic) and keeps the connection alive until the winner's events come.

The raw bytes are read with httpx, so what an SDK would hide (comments, pings) is seen.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from tests.proxy.conftest import fault_uri, proxied, settings_for
from tests.support.fault_server import FaultServer
from veriscale.models.uri import load_backend

DELAY_S = 2.5  # every upstream answer takes this long
FIRST_BYTE_S = 1.8  # the first chunk comes well before that (keep-alive every 1 s)


def ask(api: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"hi from {api}"}]  # one prompt each: no answer comes from the store's cache


def stream(url: str, body: dict[str, Any]) -> tuple[str, float, str, float]:
    """The first raw chunk and when it came, then the rest and when it ended."""
    started = time.monotonic()
    with httpx.stream("POST", url, json=body, timeout=30) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        chunks = r.iter_raw()
        first = next(chunks).decode()
        first_s = time.monotonic() - started
        rest = b"".join(chunks).decode()
    return first, first_s, rest, time.monotonic() - started


@pytest.fixture(scope="module")
def slow_proxy(tmp_path_factory: pytest.TempPathFactory):
    with FaultServer() as judge_srv, FaultServer(delay_s=DELAY_S, chat_reply="Slow but sure.") as up:
        judge = load_backend(f"{judge_srv.url}?retries=0#judge")
        with proxied(tmp_path_factory.mktemp("slow") / "store.sqlite3", settings_for((fault_uri(up), 2)), judge) as p:
            yield p


def test_chat_completions_sends_keep_alive_comments_until_the_reply(slow_proxy) -> None:
    first, first_s, rest, total_s = stream(slow_proxy.url + "/v1/chat/completions",
                                           {"model": "m", "messages": ask("chat"), "stream": True})
    assert first == ": keep-alive\n\n" and first_s < FIRST_BYTE_S, (first, first_s)
    assert total_s >= DELAY_S and '"content": "sure."' in rest and rest.endswith("data: [DONE]\n\n")
    assert rest.index(": keep-alive") < rest.index("data: ")  # kept alive for the whole wait


def test_responses_opens_with_response_created(slow_proxy) -> None:
    first, first_s, rest, total_s = stream(slow_proxy.url + "/v1/responses", {"model": "m", "input": "hi from responses",
                                                                                  "stream": True})
    assert first.startswith("event: response.created\ndata: ") and first_s < FIRST_BYTE_S, (first, first_s)
    assert ": keep-alive" in rest and total_s >= DELAY_S
    assert rest.index(": keep-alive") < rest.index("event: response.output_item.added")
    assert "event: response.completed" in rest and "Slow but sure." in rest


def test_anthropic_opens_with_pings_then_message_start_once_a_candidate_counted_the_input(slow_proxy) -> None:
    first, first_s, rest, total_s = stream(slow_proxy.url + "/v1/messages",
                                           {"model": "m", "max_tokens": 8, "messages": ask("anthropic"), "stream": True})
    assert first.startswith("event: ping\ndata: ") and first_s < FIRST_BYTE_S, (first, first_s)  # the SDK skips pings
    assert total_s >= DELAY_S and (first + rest).count("event: ping") >= 2  # one at the start, then each second
    assert rest.index("event: ping") < rest.index("event: message_start") < rest.index("event: content_block_start")
    assert '"input_tokens": 50' in rest.split("event: message_start", 1)[1].split("\n\n", 1)[0]  # the upstream's count
    assert rest.rstrip().endswith('data: {"type": "message_stop"}') and '"text": "sure."' in rest


def test_a_client_that_leaves_mid_wait_leaves_no_run_running(slow_proxy) -> None:
    body = {"model": "m", "messages": ask("leaver"), "stream": True}
    with httpx.stream("POST", slow_proxy.url + "/v1/chat/completions", json=body, timeout=30) as r:
        chunks = r.iter_raw()
        assert next(chunks) == next(chunks) == b": keep-alive\n\n"  # a second one: the candidates are running
    deadline = time.monotonic() + DELAY_S * 4
    while (run := max((r for r in slow_proxy.store.runs() if r.command == "proxy chat"), key=lambda r: r.id)).status \
            == "running" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run.status == "cancelled" and "disconnected" in run.result["error"], run
