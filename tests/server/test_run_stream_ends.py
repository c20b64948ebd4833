"""The dashboard's live stream of a run whose process was killed ends, with the run interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.dashboard import dashboard
from tests.support.fault_server import FaultServer
from tests.support.scripted_model import ScriptedScoreModel
from veriscale.engine.store import Store

GUARD_S = 120  # hang guard, far above the second or two the stream needs


def test_the_stream_of_a_killed_run_ends_with_its_end_event(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("VERISCALE_RUN_STALE_S", "1")
    store_path, steps = tmp_path / "store.sqlite3", tmp_path / "agent.jsonl"
    steps.write_text(json.dumps({"task": "Count to three"}) + "\n")
    with FaultServer() as srv, dashboard(store_path, ScriptedScoreModel()) as d:
        follower = subprocess.Popen(
            [sys.executable, "-m", "veriscale", "track", "--follow", str(steps), "--store", str(store_path),
             "--model", srv.url + "#fault-model", "--idle-timeout", "600"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, "VERISCALE_CONFIG": "", "VERISCALE_RUN_STALE_S": "1"})
        try:
            store = Store.open(store_path)
            deadline = time.monotonic() + GUARD_S
            while not store.runs():
                assert time.monotonic() < deadline and follower.poll() is None, "the followed run did not start"
                time.sleep(0.1)
            (run,) = store.runs()
            assert run.status == "running"
        finally:
            follower.send_signal(signal.SIGKILL)  # no handler runs: the run stays `running` in the store
            follower.wait(GUARD_S)
        blocks, deadline = [], time.monotonic() + GUARD_S
        with d.client() as c:
            with c.stream("GET", f"/api/runs/{run.id}/stream") as stream:
                for chunk in stream.iter_text():  # a keepalive comment comes at least every 15 s
                    blocks += [b for b in chunk.split("\n\n") if b.strip()]
                    if any(b.startswith("event: end") for b in blocks) or time.monotonic() > deadline:
                        break
            end = [b for b in blocks if b.startswith("event: end")]
            assert end, f"the stream did not end: {blocks[-3:]}"
            assert json.loads(end[0].split("data: ", 1)[1])["status"] == "interrupted"
            assert c.get(f"/api/runs/{run.id}").json()["status"] == "interrupted"
