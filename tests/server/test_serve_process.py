"""``veriscale serve`` and ``veriscale track --follow`` as real processes on the embedded model:
a job killed mid-run resumes after a restart without repeating a finished call, and a followed
agent's curve reaches the event stream while it runs."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.dashboard import dashboard
from tests.support.serve_process import free_port, wait_up
from tests.support.scripted_model import ScriptedScoreModel

pytestmark = pytest.mark.embedded

TASK = "Write a shell command that prints how many lines the file notes.txt has."
ANSWERS = {"a.md": "wc -l < notes.txt", "b.md": "cat notes.txt", "c.md": "ls -la notes.txt"}


def _serve(store: Path, folder: Path, port: int, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "veriscale", "serve", "--store", str(store), "--allow-dir",
                             str(folder), "--port", str(port)], stdout=log.open("ab"), stderr=subprocess.STDOUT,
                            start_new_session=True,  # a killed server's run reads interrupted 2 s after its last heartbeat
                            env={**os.environ, "VERISCALE_CONFIG": "", "VERISCALE_RUN_STALE_S": "2"})


def _ok_calls(store: Path) -> int:
    with sqlite3.connect(store) as conn:
        return conn.execute("SELECT COUNT(*) FROM calls WHERE status = 'ok'").fetchone()[0]


def test_a_job_killed_with_its_server_resumes_after_a_restart_without_repeating_finished_calls(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "task.md").write_text(TASK)
    for name, text in ANSWERS.items():
        (folder / name).write_text(text)
    store, log, port = tmp_path / "store.sqlite3", tmp_path / "serve.log", free_port()
    url = f"http://127.0.0.1:{port}"
    proc = _serve(store, folder, port, log)
    try:
        wait_up(url, proc, log)
        params = {"paths": [str(folder / n) for n in ("task.md", *ANSWERS)], "method": "round_robin",
                  "adaptive": False, "criteria": "general"}
        job = httpx.post(url + "/api/jobs", json={"kind": "select", "params": params}).json()
        deadline = time.monotonic() + 120
        while _ok_calls(store) < 6:
            assert time.monotonic() < deadline, log.read_text()
            assert httpx.get(f"{url}/api/jobs/{job['id']}").json()["status"] in ("queued", "running")
            time.sleep(0.05)
        first_run = httpx.get(f"{url}/api/jobs/{job['id']}").json()["run_id"]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # no shutdown handler runs
        proc.wait(30)
    before = _ok_calls(store)

    proc = _serve(store, folder, port, log)
    try:
        wait_up(url, proc, log)
        deadline = time.monotonic() + 300
        while (done := httpx.get(f"{url}/api/jobs/{job['id']}").json())["status"] in ("queued", "running"):
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        assert done["status"] == "done" and done["attempts"] == 2, done
        assert httpx.get(f"{url}/api/runs/{first_run}").json()["status"] == "interrupted"
        second = httpx.get(f"{url}/api/runs/{done['run_id']}").json()
        assert second["command"] == "select" and second["result"]["best"]["id"] in ANSWERS.keys() | {"a", "b", "c"}
        assert second["cost"]["cache_hits"] >= before, "every call finished before the kill came from the store"
        assert second["cost"]["calls"] + before == _ok_calls(store), "no finished call was made twice"
        assert "resuming 1 unfinished job" in log.read_text()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def _events(url: str, run_id: int, until: float) -> list[tuple[str, dict]]:
    out = []
    with httpx.stream("GET", f"{url}/api/runs/{run_id}/stream", timeout=until) as stream:
        for block in _blocks(stream.iter_text()):
            kind = next((line[7:] for line in block.splitlines() if line.startswith("event: ")), None)
            data = next((line[6:] for line in block.splitlines() if line.startswith("data: ")), "{}")
            if kind:
                out.append((kind, json.loads(data)))
                if kind == "point" and data and len([k for k, _ in out if k == "point"]) >= 2:
                    return out
    return out


def _blocks(chunks):
    buffer = ""
    for chunk in chunks:
        buffer += chunk
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            yield block


def test_a_followed_agents_points_reach_the_dashboard_stream_while_it_runs(tmp_path):
    steps = tmp_path / "agent.jsonl"
    steps.write_text(json.dumps({"task": TASK}) + "\n")
    (tmp_path / "task.md").write_text(TASK)
    store = tmp_path / "store.sqlite3"
    follower = subprocess.Popen([sys.executable, "-m", "veriscale", "track", "--follow", str(steps), "--store", str(store),
                                 "--idle-timeout", "900"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env={**os.environ, "VERISCALE_CONFIG": ""})
    try:
        with dashboard(store, ScriptedScoreModel()) as d, d.client() as c:
            deadline = time.monotonic() + 60
            while not (runs := c.get("/api/runs", params={"command": "track --follow"}).json()["runs"]):
                assert time.monotonic() < deadline and follower.poll() is None
                time.sleep(0.1)
            run_id = runs[0]["id"]
            with steps.open("a") as f:
                for text in ("ls -la to see notes.txt", "wc -l < notes.txt printed 12"):
                    f.write(json.dumps({"role": "agent", "text": text}) + "\n")
                    f.flush()
            events = _events(d.url, run_id, 120)
            points = [data for kind, data in events if kind == "point"]
            assert [p["point"]["step"] for p in points] == [1, 2]
            assert c.get(f"/api/runs/{run_id}").json()["status"] == "running", "the points came while it ran"
            assert c.get(f"/api/runs/{run_id}/steps", params={"trajectory": "agent"}).json()["total"] == 2
            with steps.open("a") as f:
                f.write(json.dumps({"done": True}) + "\n")
            assert follower.wait(120) == 0
            view = c.get(f"/api/runs/{run_id}/progress").json()
            assert view["status"] == "ok" and len(view["curves"][0]["points"]) == 2
    finally:
        if follower.poll() is None:
            follower.kill()
