"""Progress of the agent's conversation is scored after each reply, never before it: a
``proxy conversation`` run appears and gets a ``point`` event once the reply has gone.

The verifier is the embedded model (its ProgressJudge scores for real); the upstream a FaultServer
whose candidates agree, so the request itself makes no verifier call.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.proxy.conftest import fault_uri, proxied, settings_for
from tests.support.fault_server import FaultServer
from veriscale.engine.run_log import RunLog

pytestmark = pytest.mark.embedded

TASK = [{"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Create hello.txt containing the words hello world."}]


def wait_for_point(p, seconds: float = 60.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        tracked = [r for r in p.store.runs() if r.command == "proxy conversation"]
        if tracked:
            points = [e for e in RunLog(p.store).since(tracked[0].id) if e.kind == "point"]
            if points:
                return tracked[0], points
        time.sleep(0.2)
    raise AssertionError(f"no point event within {seconds} s: {[(r.command, r.status) for r in p.store.runs()]}")


def test_a_reply_is_tracked_after_it_went(store_path: Path, verifier) -> None:
    with FaultServer(chat_reply="I will write hello.txt now.") as up, \
            proxied(store_path, settings_for((fault_uri(up), 2), progress=True), verifier) as p:
        raw = p.openai().chat.completions.with_raw_response.create(model="m", messages=TASK)
        replied_at = time.time()
        assert raw.parse().choices[0].message.content == "I will write hello.txt now."
        request_run = p.run(raw.headers["x-veriscale-run"])
        assert request_run.status == "ok" and request_run.result["latency_s"] > 0

        tracked, points = wait_for_point(p)
        assert tracked.args["conversation"].startswith("conv-") and tracked.model == verifier.uri
        point = points[0]
        assert point.data["trajectory"] == tracked.args["conversation"] and "point" in point.data
        # the reply did not wait for the tracking: its run was finished (latency recorded) before the point
        assert request_run.finished_at < point.at and replied_at < point.at
        assert request_run.created_at + request_run.result["latency_s"] <= point.at
        steps = RunLog(p.store).steps(tracked.id, tracked.args["conversation"])
        assert [s["role"] for s in steps] == ["agent"] and "hello.txt" in steps[0]["text"]
        assert p.score_calls(request_run.id) == [] and p.score_calls(tracked.id)  # the judge's calls are its own run's

