"""SIGKILL at seeded model calls of a harness run: the rerun replays every finished turn from the
store (none is sent again) and its session files equal those of a run never interrupted.

The driver (tests/harness/resume_driver.py) runs the protocol on a fixture task with a scripted
chat double and kills itself when its k-th model call starts; k is drawn from a seed.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability.crash_support import PROCESS_TIMEOUT_S, REPO, store_check

SEEDS = range(4)


def _driver(task: Path, runs: Path, store: Path, log: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    return subprocess.run([sys.executable, "-m", "tests.harness.resume_driver", str(task), str(runs), str(store),
                           str(log), *extra], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=PROCESS_TIMEOUT_S)


def _log(log: Path) -> list[tuple[str, ...]]:
    return [tuple(line.split()) for line in log.read_text().splitlines()] if log.exists() else []


def _committed_turns(store: Path) -> set[str]:
    """The driver's sha of every chat call the store holds as finished."""
    conn = sqlite3.connect(store)
    try:
        rows = conn.execute("SELECT request FROM calls WHERE kind = 'chat' AND status = 'ok'").fetchall()
    finally:
        conn.close()
    return {hashlib.sha256(json.dumps(json.loads(r[0])["messages"], sort_keys=True).encode()).hexdigest()[:16]
            for r in rows}


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def uninterrupted(materialized, tmp_path_factory):
    root = tmp_path_factory.mktemp("fresh")
    task = root / "quarterly_report"
    shutil.copytree(materialized["quarterly_report"]["dir"], task)
    done = _driver(task, root / "runs", root / "store.sqlite3", root / "calls.log")
    assert done.returncode == 0, done.stderr
    calls = sum(1 for entry in _log(root / "calls.log") if entry[0] == "start")
    return _files(root / "runs" / "quarterly_report" / "r" / "sessions"), calls


@pytest.mark.parametrize("seed", SEEDS)
def test_a_harness_run_killed_at_a_seeded_call_resumes_to_the_same_files(seed, uninterrupted, materialized, tmp_path):
    files, calls = uninterrupted
    kill_at = random.Random("harness").sample(range(1, calls + 1), len(SEEDS))[seed]  # distinct points
    task = tmp_path / "quarterly_report"
    shutil.copytree(materialized["quarterly_report"]["dir"], task)
    store, log = tmp_path / "store.sqlite3", tmp_path / "calls.log"
    killed = _driver(task, tmp_path / "runs", store, log, "--kill-at", str(kill_at))
    assert killed.returncode == -9, f"not killed at call {kill_at} of {calls}: {killed.stderr[-1500:]}"
    finished = _committed_turns(store)  # finished = answered and committed (sessions run side by side)
    assert store_check(store)["integrity"] == "ok"

    log.unlink()
    rerun = _driver(task, tmp_path / "runs", store, log)
    assert rerun.returncode == 0, rerun.stderr
    sent_again = {entry[2] for entry in _log(log) if entry[0] == "start"}
    assert not sent_again & finished, "a finished turn was sent again"
    assert _files(tmp_path / "runs" / "quarterly_report" / "r" / "sessions") == files
    assert store_check(store)["running"] == 0
