"""A ``select-many --executor ray`` driver killed mid-run (SIGKILL, while a worker is inside a task)
and started again on the same cluster: nothing it committed is lost, the finished task is not
decided again, no call it committed is asked of the model again, and the rerun finishes.

The drivers are separate processes (``tests/support/ray_restart_doubles.py``) joining a Ray head
this test starts, as a user's would join a cluster.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.many.test_select_many import _write_pool
from tests.many.test_select_many_ray import REPO

ray = pytest.importorskip("ray")  # the [ray] extra; CI installs it with [test]
GUARD_S = 300  # a hang guard only: each wait ends on an event (a file, a committed call, an exit)


@pytest.fixture(scope="module")
def head():
    from ray import cluster_utils

    if ray.is_initialized():
        ray.shutdown()
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
    yield cluster
    cluster.shutdown()


def _committed(store: Path, task: str) -> set[str]:
    """The requests of the successful calls the store links to a select run of ``task``."""
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=30) as db:
        rows = db.execute("SELECT c.request FROM run_calls rc JOIN calls c ON c.key = rc.call_key JOIN runs r ON "
                          "r.id = rc.run_id WHERE r.command = 'select' AND json_extract(r.args, '$.task') = ? AND "
                          "c.status = 'ok'", (task,)).fetchall()
    return {json.dumps(json.loads(r), sort_keys=True) for (r,) in rows}


def _wait(what: str, done, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + GUARD_S
    while not done():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the driver ended (exit {proc.returncode}) before {what}: {out[-2000:]} {err[-3000:]}")
        assert time.monotonic() < deadline, f"hang guard: {what}"
        time.sleep(0.05)


def test_a_driver_killed_mid_run_and_started_again_loses_nothing_and_repeats_no_call(head, tmp_path: Path) -> None:
    pool = _write_pool(tmp_path / "pool.jsonl")  # t1, t2, t3: one at a time, in order
    picks, store, folder = tmp_path / "picks.jsonl", tmp_path / "s.sqlite3", tmp_path / "witness"
    folder.mkdir()
    argv = [sys.executable, "-m", "tests.support.ray_restart_doubles", head.address, str(pool), str(picks), str(store),
            str(folder)]
    first = subprocess.Popen([*argv, "1"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait("a worker held task t2", lambda: (folder / "holding").exists(), first)
        _wait("the driver committed two calls of t2", lambda: len(_committed(store, "t2")) >= 2, first)
    finally:
        first.kill()  # SIGKILL: the driver dies mid-task, as a crash or an OOM kill would take it
        first.communicate()
    t1_line = json.loads(picks.read_text().splitlines()[0])
    assert t1_line["task"] == "t1" and t1_line["pick"] == "t1-r1"
    before = {task: _committed(store, task) for task in ("t1", "t2")}
    assert len(before["t2"]) >= 2

    second = subprocess.run([*argv, "2"], cwd=REPO, capture_output=True, text=True, timeout=GUARD_S)
    assert second.returncode == 0, second.stderr[-3000:]
    report = json.loads(second.stdout.strip().splitlines()[-1])
    assert (report["skipped"], report["decided"], report["failed"]) == (1, 2, 0)
    lines = {line["task"]: line for line in map(json.loads, picks.read_text().splitlines())}
    assert lines["t1"] == t1_line  # the finished task's line is kept as it was
    assert (lines["t2"]["pick"], lines["t3"]["pick"]) == ("t2-r1", "t3-r1")
    asked_again = set((folder / "asked-2.txt").read_text().splitlines())
    assert asked_again and not asked_again & (before["t1"] | before["t2"])  # no committed call asked twice
    assert not any("Task t1:" in line for line in asked_again)  # t1 was not decided again
    assert before["t2"] <= _committed(store, "t2")  # nothing committed was lost
