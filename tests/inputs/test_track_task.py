"""``track --task`` (files and ``--follow``) and the REST ``track`` job with a task read the task file.

The CLI runs in a subprocess against the fault server (a real HTTP endpoint answering with fixed
digit probabilities); the REST job runs on the scripted progress judge (a test double).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.dashboard import dashboard
from tests.support.fault_server import FaultServer
from tests.support.scripted_progress import ScriptedProgressModel

EX = Path(__file__).resolve().parents[2] / "examples" / "progress"
TASK = "Write hello.txt containing the single word hello (a task only the task file names)."


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "veriscale", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def digits():
    with FaultServer(top={"7": 0.7, "3": 0.3}) as srv:
        yield srv


def _task_file(tmp_path: Path) -> Path:
    path = tmp_path / "task.md"
    path.write_text(TASK + "\n")
    return path


def _prompts(server: FaultServer, since: int) -> str:
    return "\n".join(json.dumps(r["body"]) for r in server.requests[since:])


def test_track_a_trajectory_with_a_task_file(digits, tmp_path):
    before = len(digits.requests)
    proc = run_cli("track", str(EX / "fail_trajectory.json"), "--task", str(_task_file(tmp_path)), "--checkpoints", "2",
                   "--model", digits.url + "#fault-model", "--store", str(tmp_path / "s.sqlite3"), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["curves"][0]["points"][0]["step"] == 2
    assert "the single word hello" in _prompts(digits, before)  # the task file's text, not the run's own task


def test_track_follow_with_a_task_file_as_the_readme_shows(digits, tmp_path):
    steps = tmp_path / "steps.jsonl"
    steps.write_text("".join(json.dumps(line) + "\n" for line in (
        {"role": "agent", "text": "I will write the file.", "observation": "ok"},
        {"role": "agent", "text": "echo hello > hello.txt", "observation": ""},
        {"done": True})))
    before = len(digits.requests)
    proc = run_cli("track", "--follow", str(steps), "--task", str(_task_file(tmp_path)), "--idle-timeout", "60",
                   "--model", digits.url + "#fault-model", "--store", str(tmp_path / "s.sqlite3"))
    assert proc.returncode == 0, proc.stderr
    assert "followed run ended (done)" in proc.stdout
    assert "the single word hello" in _prompts(digits, before)


def test_a_track_job_with_a_task_reads_the_task_file(tmp_path):
    traj = tmp_path / "t1.jsonl"
    messages = [{"role": "user", "content": "the run's own task"}] + [{"role": "assistant", "content": w}
                                                                       for w in ("UP", "UP", "DOWN")]
    traj.write_text(json.dumps({"id": "t1", "messages": messages}) + "\n")
    task = _task_file(tmp_path)
    with dashboard(tmp_path / "s.sqlite3", ScriptedProgressModel(), roots=(tmp_path,)) as d, d.client() as c:
        job = d.wait(d.submit("track", {"paths": [str(traj)], "task": str(task)})["id"])
        assert job["status"] == "done", job
        calls = c.get(f"/api/runs/{job['run_id']}/calls").json()["calls"]
        call = c.get(f"/api/calls/{calls[0]['key']}").json()
        prompt = "\n".join(m["content"] for m in call["messages"])
        assert "the single word hello" in prompt and "the run's own task" not in prompt
