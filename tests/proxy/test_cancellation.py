"""A proxied request's work lives in one task scope: a client that leaves mid-pick, or a give-up
at ``proxy.timeout_s``, cancels the verifier (and upstream) calls in flight and the run ends
``cancelled`` only once they stopped; nothing starts or completes after that.

Run against a real ``veriscale serve`` process. The upstream is a FaultServer whose two
candidates differ (so a pick runs); the verifier is a FaultServer that holds every score request
after the start-up probe, so the pick is in flight when the client leaves or the timeout passes.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.fault_server import FaultServer
from tests.support.serve_process import free_port, wait_up

TIMEOUT_S = 4.0  # proxy.timeout_s: the give-up
GUARD_S = 60.0  # hang guard: each wait below is expected to take well under TIMEOUT_S
QUESTION = [{"role": "user", "content": "How do I check my change?"}]


class Served:
    def __init__(self, url: str, store: Path, judge: FaultServer, up: FaultServer, log: Path) -> None:
        self.url, self.store, self.judge, self.up, self.log = url, store, judge, up, log

    def score_requests(self) -> int:
        return len([r for r in self.judge.requests if r["path"].endswith("/completions")])

    def wait_scoring(self, before: int) -> None:
        """Until the pick's first score request reached the (holding) verifier."""
        deadline = time.monotonic() + GUARD_S
        while self.score_requests() <= before:
            assert time.monotonic() < deadline, (len(self.up.requests), self.log.read_text())
            time.sleep(0.05)

    def wait_ended(self, run_id: int) -> dict[str, Any]:
        deadline = time.monotonic() + GUARD_S
        while (run := self.run(run_id))["status"] == "running":
            assert time.monotonic() < deadline, f"run {run_id} still running after {GUARD_S} s: {self.log.read_text()}"
            time.sleep(0.05)
        return run

    def run(self, run_id: int) -> dict[str, Any]:
        with sqlite3.connect(self.store) as conn:
            status, result, finished = conn.execute("SELECT status, result, finished_at FROM runs WHERE id = ?",
                                                    (run_id,)).fetchone()
        return {"status": status, "result": json.loads(result) if result else None, "finished_at": finished}

    def calls(self, run_id: int) -> list[dict[str, Any]]:
        with sqlite3.connect(self.store) as conn:
            rows = conn.execute("""SELECT c.kind, c.status, c.created_at FROM run_calls rc JOIN calls c
                                   ON c.key = rc.call_key WHERE rc.run_id = ? ORDER BY rc.id""", (run_id,)).fetchall()
        return [{"kind": k, "status": s, "created_at": t} for k, s, t in rows]

    def newest_run(self, command: str) -> int:
        deadline = time.monotonic() + GUARD_S
        while True:
            with sqlite3.connect(self.store) as conn:
                row = conn.execute("SELECT MAX(id) FROM runs WHERE command = ?", (command,)).fetchone()
            if row[0] is not None:
                return row[0]
            assert time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.05)


@pytest.fixture(scope="module", params=["round_robin", "early"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp(f"cancel-{request.param}")
    replies = ["Run pytest -q, then read the diff.", "Push it and see."]
    with FaultServer() as judge, FaultServer(chat_reply=lambda body: replies[body["seed"] % 2]) as up:
        config = folder / "config.toml"
        config.write_text(f'[proxy]\nverifier = "{judge.url}?retries=0#judge"\ntimeout_s = {TIMEOUT_S}\n'
                          f'progress = false\nmax_tokens = 16\nschedule = "{request.param}"\n'
                          f'[[proxy.candidates]]\nmodel = "{up.url}?retries=0#fault-model"\nn = 2\n')
        store, log, port = folder / "store.sqlite3", folder / "serve.log", free_port()
        proc = subprocess.Popen([sys.executable, "-m", "veriscale", "serve", "--store", str(store), "--port", str(port)],
                                stdout=log.open("ab"), stderr=subprocess.STDOUT,
                                env={**os.environ, "VERISCALE_CONFIG": str(config)})
        try:
            url = f"http://127.0.0.1:{port}"
            wait_up(url, proc, log)
            yield Served(url, store, judge, up, log)
        finally:
            judge.release()
            proc.terminate()
            proc.wait(30)


def settled_after(s: Served, run: dict[str, Any], run_id: int, before: int) -> None:
    """Release the verifier: had any pick work still run, it would now finish or start calls."""
    asked = s.score_requests()
    s.judge.release()
    # The held requests are answered now: the event leftover work would go on from. Wait for it (the
    # guard is only a hang guard), not for a fixed second.
    deadline = time.monotonic() + GUARD_S
    while s.judge.in_flight:
        assert time.monotonic() < deadline, "the verifier's held requests were never answered"
        time.sleep(0.02)
    assert s.score_requests() == asked, "a verifier call started after the run ended"
    calls = s.calls(run_id)
    scores = [c for c in calls if c["kind"] == "score"]
    assert scores and all(c["status"] == "cancelled" for c in scores), calls
    assert asked - before == len(scores)  # each held request is one cancelled call of the run
    assert all(c["created_at"] <= run["finished_at"] for c in calls), (calls, run)  # none completed after
    assert s.run(run_id) == run  # and the run did not change after it ended


def test_a_client_that_leaves_during_the_pick_cancels_its_calls_and_the_run(served: Served) -> None:
    before = served.score_requests()
    served.judge.hold_after(0)
    body = {"model": "m", "messages": QUESTION + [{"role": "user", "content": "leave"}], "stream": True}
    with httpx.stream("POST", served.url + "/v1/chat/completions", json=body, timeout=GUARD_S) as r:
        chunks = r.iter_raw()  # held: a dropped iterator closes the stream at once
        assert next(chunks) == b": keep-alive\n\n"
        served.wait_scoring(before)  # the candidates are back and the pick is waiting on the verifier
    run_id = served.newest_run("proxy chat")
    run = served.wait_ended(run_id)
    assert run["status"] == "cancelled" and "disconnected" in run["result"]["error"], run
    settled_after(served, run, run_id, before)


def test_a_pick_given_up_at_the_timeout_cancels_its_calls_in_flight(served: Served) -> None:
    before = served.score_requests()
    served.judge.hold_after(0)
    raw = httpx.post(served.url + "/v1/chat/completions", timeout=GUARD_S,
                     json={"model": "m", "messages": QUESTION + [{"role": "user", "content": "wait"}]})
    assert raw.status_code == 200 and raw.headers["x-veriscale-pick"] == "verification failed", raw.text
    assert raw.json()["choices"][0]["message"]["content"] == "Run pytest -q, then read the diff."  # the first valid
    run_id = int(raw.headers["x-veriscale-run"])
    run = served.run(run_id)  # ended before the reply went
    assert run["status"] == "cancelled" and f"{TIMEOUT_S:g} s timeout" in run["result"]["error"], run
    settled_after(served, run, run_id, before)
