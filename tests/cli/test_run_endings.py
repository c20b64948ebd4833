"""Every way a command ends, ends its run: an error, Ctrl-C, SIGTERM; a SIGKILL is found by its
stale heartbeat. Real `veriscale` child processes against an HTTP model double."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.fault_server import FaultServer

EX = Path(__file__).resolve().parents[2] / "examples" / "pair"
STALE_S = "1"  # the heartbeat threshold these tests use (VERISCALE_RUN_STALE_S)
GUARD_S = 120  # hang guard: far above what any step takes


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "VERISCALE_CONFIG": "", **extra}


def _compare(srv: FaultServer, store: Path) -> list[str]:
    return [sys.executable, "-m", "veriscale", "compare", str(EX / "task.md"), str(EX / "a.md"), str(EX / "b.md"),
            "--model", srv.url + "#fault-model", "--concurrency", "1", "--store", str(store), "--json"]


def _runs(store: Path, **env: str) -> list[dict]:
    proc = subprocess.run([sys.executable, "-m", "veriscale", "runs", "list", "--json", "--store", str(store)],
                          capture_output=True, text=True, timeout=GUARD_S, env=_env(**env))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _show(store: Path, run_id: int, **env: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "veriscale", "runs", "show", str(run_id), "--store", str(store)],
                          capture_output=True, text=True, timeout=GUARD_S, env=_env(**env))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _ok_calls(store: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute("select count(*) from calls where status='ok'").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def _start_mid_run(srv: FaultServer, store: Path, **env: str) -> subprocess.Popen:
    """A compare of 12 slow calls, returned once a few calls are done (the run is under way)."""
    # A suite started in the background runs with SIGINT ignored, and an ignored signal stays
    # ignored across exec: give the child the default, as a terminal would.
    proc = subprocess.Popen(_compare(srv, store), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(**env), preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + GUARD_S
    while _ok_calls(store) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None and _ok_calls(store) >= 2, proc.communicate(timeout=GUARD_S)
    return proc


def test_a_user_error_mid_run_leaves_it_failed_with_the_sentence(tmp_path):
    store = tmp_path / "s.sqlite3"
    with FaultServer() as srv:
        proc = subprocess.run([sys.executable, "-m", "veriscale", "score", str(EX / "task.md"), str(EX / "a.md"),
                               "--model", srv.url + "#fault-model", "--max-calls", "1", "--store", str(store)],
                              capture_output=True, text=True, timeout=GUARD_S, env=_env())
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (run,) = _runs(store)
    assert run["command"] == "score" and run["status"] == "failed"
    shown = _show(store, run["id"])
    assert "call budget (--max-calls)" in shown["result"]["error"], shown
    assert shown["finished_at"] is not None
    assert shown["process"]["pid"] not in (None, os.getpid()) and shown["process"]["start"] is not None
    assert shown["heartbeat_at"] >= shown["created_at"]


@pytest.mark.parametrize(("sig", "code", "words"), [(signal.SIGINT, 130, "Ctrl-C"), (signal.SIGTERM, 143, "SIGTERM")])
def test_ctrl_c_and_sigterm_end_the_run_as_cancelled(tmp_path, sig, code, words):
    store = tmp_path / "s.sqlite3"
    with FaultServer(delay_s=0.3) as srv:
        proc = _start_mid_run(srv, store)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=GUARD_S)
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr and "a rerun resumes" in stderr
    (run,) = _runs(store)
    assert run["status"] == "cancelled", run
    assert words in _show(store, run["id"])["result"]["error"]


def _follower(steps: Path, store: Path, srv: FaultServer) -> subprocess.Popen:
    """A `track --follow` waiting for steps: a live run that lasts until the test stops it."""
    steps.write_text(json.dumps({"task": "Count to three"}) + "\n")
    return subprocess.Popen([sys.executable, "-m", "veriscale", "track", "--follow", str(steps), "--store", str(store),
                             "--model", srv.url + "#fault-model", "--idle-timeout", "600"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(VERISCALE_RUN_STALE_S=STALE_S),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def test_a_killed_run_reads_interrupted_once_its_heartbeat_is_stale_and_a_live_one_never(tmp_path):
    store = tmp_path / "s.sqlite3"
    with FaultServer(delay_s=0.3) as srv:
        killed = _start_mid_run(srv, store, VERISCALE_RUN_STALE_S=STALE_S)
        killed.send_signal(signal.SIGKILL)
        killed.wait(GUARD_S)
        (dead,) = _runs(store)
        live = _follower(tmp_path / "steps.jsonl", store, srv)
        try:
            deadline = time.monotonic() + GUARD_S
            while len(runs := _runs(store)) < 2:
                assert time.monotonic() < deadline and live.poll() is None, "the live run did not start"
                time.sleep(0.2)
            alive = runs[0]
            while (shown := _show(store, dead["id"], VERISCALE_RUN_STALE_S=STALE_S))["status"] == "running":
                assert time.monotonic() < deadline, "the killed run still reads running"
                time.sleep(0.2)
            assert shown["status"] == "interrupted" and f"pid {killed.pid}" in shown["result"]["error"]
            while time.time() - alive["created_at"] < 5 * float(STALE_S):  # the live run is older than the threshold
                time.sleep(0.2)
            now = {r["id"]: r["status"] for r in _runs(store, VERISCALE_RUN_STALE_S=STALE_S)}
            assert live.poll() is None and now[alive["id"]] == "running", "a live run is never interrupted"
        finally:
            live.send_signal(signal.SIGINT)
            _, err = live.communicate(timeout=GUARD_S)
    assert "Traceback" not in err
    final = {r["id"]: r["status"] for r in _runs(store)}
    assert final == {dead["id"]: "interrupted", alive["id"]: "cancelled"}
