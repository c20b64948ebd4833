"""Fan-out and picking: agreement skips the verifier, differing candidates are verified, failed
candidates are kept with their error, and a verification that fails still answers.

The upstream is a FaultServer (instant, deterministic) whose reply can depend on the request's
``seed``, whose remainder by SEED_STRIDE the proxy sets to each candidate's index (index_of); the verifier is the embedded model,
or a FaultServer that goes down (or slow) after the start-up probe.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.proxy.conftest import (
    chat_requests,
    fault_uri,
    index_of,
    proxied,
    settings_for,
    tool_reply,
)
from tests.support.fault_server import FaultServer
from veriscale.models.uri import load_backend

QUESTION = [{"role": "user", "content": "What is 2 + 8? Answer in one sentence."}]


def by_seed(body: dict[str, Any]) -> str:
    return f"The answer is {10 + 2 * index_of(body)}."


def ask(p, messages=QUESTION, **kwargs: Any) -> tuple[Any, Any]:
    raw = p.openai().chat.completions.with_raw_response.create(model="m", messages=messages, **kwargs)
    return raw.parse(), p.run(raw.headers["x-veriscale-run"])


@pytest.mark.embedded
def test_identical_candidates_agree_and_the_verifier_is_never_asked(store_path: Path, verifier) -> None:
    with FaultServer(chat_reply="Run the tests first.") as up, \
            proxied(store_path, settings_for((fault_uri(up), 3)), verifier) as p:
        probe_calls = p.store.count_calls()
        completion, run = ask(p)
        assert completion.choices[0].message.content == "Run the tests first."
        result = run.result
        assert run.command == "proxy chat" and run.status == "ok" and run.args["n"] == 3
        assert result["how"] == "agreed" and result["winner"] == 0 and "agreed" in result["reason"]
        assert [c["index"] for c in result["candidates"]] == [0, 1, 2]
        assert all(c["reply"]["text"] == "Run the tests first." and c["error"] is None for c in result["candidates"])
        assert sorted(index_of(r["body"]) for r in chat_requests(up)) == [0, 1, 2]  # one seed a candidate
        linked = p.store.run_calls(run.id)
        assert [c["kind"] for c in linked] == ["chat"] * 3 and p.score_calls(run.id) == []
        assert p.store.count_calls() == probe_calls + 3  # no score call anywhere: the verifier was not asked


@pytest.mark.embedded
def test_the_same_action_in_other_whitespace_and_key_order_agrees(store_path: Path, verifier) -> None:
    def same_action(body: dict[str, Any]) -> Any:
        args = {"cmd": "ls", "cwd": "/tmp"} if index_of(body) % 2 else {"cwd": "/tmp", "cmd": "ls"}
        reply = tool_reply("bash", args, call_id=f"call_{index_of(body)}", text="Listing  now." if index_of(body) else " Listing now.\n")
        reply["tool_calls"][0]["function"]["arguments"] = json.dumps(args, indent=index_of(body))
        return reply

    with FaultServer(chat_reply=same_action) as up, proxied(store_path, settings_for((fault_uri(up), 3)), verifier) as p:
        completion, run = ask(p, tools=[{"type": "function", "function": {"name": "bash", "parameters": {}}}])
        assert run.result["how"] == "agreed" and p.score_calls(run.id) == []
        assert completion.choices[0].message.tool_calls[0].id == "call_0"  # the first candidate, as it came


@pytest.mark.embedded
def test_differing_candidates_are_verified_and_the_record_explains_the_pick(tmp_path: Path, store_path: Path,
                                                                           verifier) -> None:
    criteria = tmp_path / "criteria.md"  # one criterion keeps the embedded verifier's work small
    criteria.write_text("## Correctness\nThe reply answers the question correctly.\n")
    settings = settings_for((fault_uri(up := FaultServer(chat_reply=by_seed)), 2), criteria=str(criteria))
    with up, proxied(store_path, settings, verifier) as p:
        raw = p.openai().chat.completions.with_raw_response.create(model="m", messages=QUESTION)
        text = raw.parse().choices[0].message.content
        assert raw.headers["x-veriscale-pick"] == "verified"
        run_id = int(raw.headers["x-veriscale-run"])
        view = httpx.get(f"{p.url}/api/runs/{run_id}").json()
        result = view["result"]
        assert view["command"] == "proxy chat" and view["status"] == "ok" and result["how"] == "verified"
        assert view["view"] == "proxy" and view["summary"].startswith("verified: candidate ")
        shown = httpx.get(f"{p.url}/api/runs/{run_id}/selection").json()  # the dashboard's selection page
        assert len(shown["matrix"]) == 2 and shown["judgements"] and shown["reason"]
        assert [c["reply"]["text"] for c in result["candidates"]] == ["The answer is 10.", "The answer is 12."]
        assert result["winner"] in (0, 1) and result["candidates"][result["winner"]]["reply"]["text"] == text
        assert result["index"] == result["winner"]  # both valid: the index among the valid is the same
        assert isinstance(result["reason"], str) and result["reason"] and "agreed" not in result["reason"]
        assert result["method"] == "round_robin" and {r["index"] for r in result["ranking"]} == {0, 1}  # N <= 3
        assert 0 < result["sample_s"] < result["latency_s"] and 0 < result["verify_s"] <= result["latency_s"]
        assert all(c["latency_s"] > 0 for c in result["candidates"])
        scores = p.score_calls(run_id)
        usage = result["usage"]
        assert usage["model_calls"] > 0 and usage["model_calls"] + usage["cache_hits"] == len(scores)
        assert view["cost"]["calls"] == 2 + usage["model_calls"] and view["cost"]["cache_hits"] == usage["cache_hits"]
        assert view["cost"]["failed"] == 0
        assert view["cost"]["prompt_tokens"] >= 2 * 50  # the upstream's 50 a candidate, and the verifier's


@pytest.mark.embedded
def test_a_failed_candidate_is_kept_with_its_error_and_the_reply_still_comes(store_path: Path, verifier) -> None:
    with FaultServer(chat_reply="Looks done.") as up, proxied(store_path, settings_for((fault_uri(up), 3)), verifier) as p:
        up.queue("500")
        completion, run = ask(p)
        assert completion.choices[0].message.content == "Looks done."
        failed = [c for c in run.result["candidates"] if c["reply"] is None]
        assert len(run.result["candidates"]) == 3 and len(failed) == 1
        assert "HTTP 500" in failed[0]["error"] and failed[0]["latency_s"] >= 0
        assert run.status == "ok" and run.result["how"] == "agreed" and run.result["winner"] != failed[0]["index"]
        assert sorted(c["status"] for c in p.store.run_calls(run.id)) == ["failed", "ok", "ok"]

        up.queue("500", "500")
        completion, run = ask(p, messages=[{"role": "user", "content": "And now?"}])
        assert completion.choices[0].message.content == "Looks done."
        assert run.result["how"] == "only one valid" and "only one" in run.result["reason"]
        assert sum(c["reply"] is None for c in run.result["candidates"]) == 2


def test_a_verifier_that_goes_down_returns_the_first_valid_candidate(store_path: Path) -> None:
    judge = FaultServer().__enter__()
    try:
        verifier = load_backend(f"{judge.url}?retries=0#judge")
        with FaultServer(chat_reply=by_seed) as up, \
                proxied(store_path, settings_for((fault_uri(up), 3), timeout_s=3), verifier) as p:
            assert len(judge.requests) == 1  # the start-up probe passed
            judge.__exit__()
            up.queue("500")  # one candidate fails too: "first valid" is the lowest index that came back
            raw = p.openai().chat.completions.with_raw_response.create(model="m", messages=QUESTION)
            run = p.run(raw.headers["x-veriscale-run"])
            result = run.result
            first_valid = min(c["index"] for c in result["candidates"] if c["reply"] is not None)
            assert raw.headers["x-veriscale-pick"] == "verification failed" == result["how"]
            assert result["winner"] == first_valid
            assert raw.parse().choices[0].message.content == f"The answer is {10 + 2 * first_valid}."
            assert "cannot reach" in result["error"] and result["reason"].startswith("verification failed (")
            assert run.status == "ok" and sum(c["error"] is not None for c in result["candidates"]) == 1
    finally:
        judge.__exit__()


def test_a_verifier_that_hangs_is_cut_at_the_timeout(store_path: Path) -> None:
    """proxy.timeout_s bounds the verification as well as each upstream call."""
    judge = FaultServer().__enter__()
    try:
        verifier = load_backend(f"{judge.url}?retries=0&timeout=30#judge")  # its own HTTP timeout: 30 s
        with FaultServer(chat_reply=by_seed) as up, \
                proxied(store_path, settings_for((fault_uri(up), 2), timeout_s=1.5), verifier) as p:
            judge.hold_after(0)  # it answered the probe; now every score call is held unanswered
            raw = p.openai().chat.completions.with_raw_response.create(model="m", messages=QUESTION)
            held = judge.in_flight == len(judge.completion_requests()) - 1  # all but the probe still unanswered
            judge.__exit__()  # the verification left running fails fast from here on
            result = p.run(raw.headers["x-veriscale-run"]).result
            assert result["how"] == "verification failed" and "1.5 s timeout" in result["error"], result["error"]
            assert raw.parse().choices[0].message.content == "The answer is 10."  # the first valid candidate
            assert held, "the reply waited for a verifier answer instead of the timeout"
    finally:
        judge.__exit__()


def test_a_pick_given_up_at_the_timeout_makes_no_more_verifier_calls(store_path: Path) -> None:
    with FaultServer() as judge:
        verifier = load_backend(f"{judge.url}?retries=0#judge")
        with FaultServer(chat_reply=by_seed) as up, \
                proxied(store_path, settings_for((fault_uri(up), 4), timeout_s=1.5), verifier) as p:
            judge.hold_after(0)  # 4 candidates: dozens of score calls to make, 4 at a time; each held
            raw = p.openai().chat.completions.with_raw_response.create(model="m", messages=QUESTION)
            assert p.run(raw.headers["x-veriscale-run"]).result["how"] == "verification failed"
            asked = len(judge.requests)
            judge.release()  # the held calls are answered now: leftover pick work would go on from here
            deadline = time.monotonic() + 60  # hang guard only
            while judge.in_flight and time.monotonic() < deadline:
                time.sleep(0.02)
            assert judge.in_flight == 0
            assert len(judge.requests) <= asked + 4, "only the calls in flight (4 at a time) may still be sent"


@pytest.mark.embedded
def test_the_round_robin_pick_awaits_its_judge_calls_on_the_requests_loop(tmp_path: Path, store_path: Path,
                                                                          verifier, monkeypatch) -> None:
    """No thread hop: every verifier call of the pick runs on the loop (and thread) that serves the request."""
    import asyncio
    import threading

    from veriscale.proxy.proxied_request import ProxyService

    criteria = tmp_path / "criteria.md"
    criteria.write_text("## Correctness\nThe reply answers the question correctly.\n")
    picks, judged = [], []
    real_select, real_ascore = ProxyService._select, verifier.ascore

    async def select_here(self, *args: Any, **kwargs: Any) -> Any:
        picks.append((asyncio.get_running_loop(), threading.get_ident()))
        return await real_select(self, *args, **kwargs)

    async def ascore_here(request: Any) -> Any:
        judged.append((asyncio.get_running_loop(), threading.get_ident()))
        return await real_ascore(request)

    monkeypatch.setattr(ProxyService, "_select", select_here)
    monkeypatch.setattr(verifier, "ascore", ascore_here)
    settings = settings_for((fault_uri(up := FaultServer(chat_reply=by_seed)), 2), criteria=str(criteria))
    with up, proxied(store_path, settings, verifier) as p:
        judged.clear()  # the start-up's label check ran on the starting thread
        raw = p.openai().chat.completions.with_raw_response.create(model="m", messages=QUESTION)
        assert raw.headers["x-veriscale-pick"] == "verified"
    assert len(picks) == 1 and judged and set(judged) == set(picks)


@pytest.mark.embedded
def test_shutdown_closes_the_upstream_backends_and_keeps_the_shared_verifier(store_path: Path, verifier) -> None:
    with FaultServer(chat_reply="Looks done.") as up, proxied(store_path, settings_for((fault_uri(up), 2)), verifier) as p:
        ask(p)
        upstream = p.service.pools.pools[0][0].pool.endpoints[0].backend
        assert not upstream._client.is_closed
    assert upstream._client.is_closed and upstream._aclients == {}  # the app's lifespan closed what the proxy opened
    assert verifier.count_tokens("still loaded") > 0  # the embedded verifier was handed over, so it stays open
