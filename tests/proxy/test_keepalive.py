"""First bytes do not wait for the pick: with the upstream held, each stream opens at once (an SSE
keep-alive comment for Chat Completions, ``response.created`` for Responses, ``message_start``
for Anthropic) and keeps the connection alive until the winner's events come.

The upstream holds every completion request until the test releases it, so the order is what is
checked: the first chunk and a later keep-alive come while the upstream is held, the reply only
after the release. The raw bytes are read with httpx, so what an SDK would hide (comments, pings)
is seen.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from tests.proxy.conftest import fault_uri, proxied, settings_for
from tests.support.fault_server import FaultServer
from veriscale.models.uri import load_backend

HANG_GUARD_S = 60  # a last resort only: a proxy that waits for the pick never sends the first chunk


def ask(api: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"hi from {api}"}]  # one prompt each: no answer comes from the store's cache


def stream(proxy, url: str, body: dict[str, Any], keepalive: str) -> tuple[str, str, str]:
    """With every upstream request held: the first raw chunk, then what came until ``keepalive`` came
    again; then, the upstream released, the rest."""
    up = proxy.upstream
    up.hold_after(0)
    try:
        with httpx.stream("POST", url, json=body, timeout=HANG_GUARD_S) as r:
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
            chunks = r.iter_raw()
            first = next(chunks).decode()  # the upstream answered nothing yet: this cannot wait for the pick
            held = ""
            while keepalive not in held:  # the wait is kept alive while the upstream is still held
                held += next(chunks).decode()
            assert not up.gate.is_set(), "the upstream was released before the stream opened"
            up.release()
            rest = b"".join(chunks).decode()
    finally:
        up.release()
    assert up.requests, "no candidate reached the upstream"
    return first, held, held + rest


@pytest.fixture(scope="module")
def slow_proxy(tmp_path_factory: pytest.TempPathFactory):
    with FaultServer() as judge_srv, FaultServer(chat_reply="Slow but sure.") as up:
        judge = load_backend(f"{judge_srv.url}?retries=0#judge")
        with proxied(tmp_path_factory.mktemp("slow") / "store.sqlite3", settings_for((fault_uri(up), 2)), judge) as p:
            p.upstream = up
            yield p


def test_chat_completions_sends_keep_alive_comments_until_the_reply(slow_proxy) -> None:
    first, held, rest = stream(slow_proxy, slow_proxy.url + "/v1/chat/completions",
                               {"model": "m", "messages": ask("chat"), "stream": True}, ": keep-alive")
    assert first == ": keep-alive\n\n", first
    assert "data: " not in first + held, held  # nothing of the reply while the upstream was held
    assert '"content": "sure."' in rest and rest.endswith("data: [DONE]\n\n")
    assert rest.index(": keep-alive") < rest.index("data: ")  # kept alive for the whole wait


def test_responses_opens_with_response_created(slow_proxy) -> None:
    first, held, rest = stream(slow_proxy, slow_proxy.url + "/v1/responses",
                               {"model": "m", "input": "hi from responses", "stream": True}, ": keep-alive")
    assert first.startswith("event: response.created\ndata: "), first
    assert "event: response.output_item.added" not in first + held, held
    assert rest.index(": keep-alive") < rest.index("event: response.output_item.added")
    assert "event: response.completed" in rest and "Slow but sure." in rest


def test_anthropic_opens_with_pings_then_message_start_once_a_candidate_counted_the_input(slow_proxy) -> None:
    first, held, rest = stream(slow_proxy, slow_proxy.url + "/v1/messages",
                               {"model": "m", "max_tokens": 8, "messages": ask("anthropic"), "stream": True},
                               "event: ping")
    assert first.startswith("event: ping\ndata: "), first  # the SDK skips pings
    assert (first + rest).count("event: ping") >= 2  # one at the start, then each second
    assert "event: message_start" not in first + held, held  # no candidate counted the input while held
    assert rest.index("event: ping") < rest.index("event: message_start") < rest.index("event: content_block_start")
    assert '"input_tokens": 50' in rest.split("event: message_start", 1)[1].split("\n\n", 1)[0]  # the upstream's count
    assert rest.rstrip().endswith('data: {"type": "message_stop"}') and '"text": "sure."' in rest


def test_a_client_that_leaves_mid_wait_leaves_no_run_running(slow_proxy) -> None:
    body = {"model": "m", "messages": ask("leaver"), "stream": True}
    slow_proxy.upstream.hold_after(0)  # no candidate can finish: only the client's leaving ends the run
    try:
        with httpx.stream("POST", slow_proxy.url + "/v1/chat/completions", json=body, timeout=HANG_GUARD_S) as r:
            chunks = r.iter_raw()
            assert next(chunks) == next(chunks) == b": keep-alive\n\n"  # a second one: the candidates are running
        deadline = time.monotonic() + HANG_GUARD_S
        while (run := max((r for r in slow_proxy.store.runs() if r.command == "proxy chat"),
                          key=lambda r: r.id)).status == "running" and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        slow_proxy.upstream.release()
    assert run.status == "cancelled" and "disconnected" in run.result["error"], run
