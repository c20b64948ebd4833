"""A harness phase killed with SIGKILL mid-phase and rerun replays its finished turns from the
store: no finished chat call is sent again, and the phase's files come out byte-identical to
those of a run that was never interrupted."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _driver(task: Path, runs: Path, store: Path, log: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.Popen([sys.executable, "-m", "tests.harness.resume_driver", str(task), str(runs), str(store),
                             str(log), *extra], cwd=REPO, env=env)


def _events(log: Path) -> list[tuple[str, str, str]]:
    return [tuple(line.split()) for line in log.read_text().splitlines()] if log.exists() else []  # type: ignore[misc]


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_killed_phase_replays_its_finished_turns_and_ends_byte_identical(materialized: dict, tmp_path: Path) -> None:
    task = tmp_path / "quarterly_report"
    shutil.copytree(materialized["quarterly_report"]["dir"], task)
    store, log = tmp_path / "store.sqlite3", tmp_path / "calls.log"

    first = _driver(task, tmp_path / "runs", store, log, "--block-at", "3")
    deadline = time.monotonic() + 120
    while not any(e[:2] == ("start", "resolve") for e in _events(log)[2:]) or \
            sum(1 for e in _events(log) if e[:2] == ("start", "resolve")) < 3:
        assert first.poll() is None and time.monotonic() < deadline, "the driver ended before blocking"
        time.sleep(0.05)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    finished = {sha for kind, phase, sha in _events(log) if kind == "done" and phase == "resolve"}
    assert len(finished) == 2  # control: two resolver turns finished before the kill

    log.unlink()
    assert _driver(task, tmp_path / "runs", store, log).wait(timeout=120) == 0
    sent_again = [sha for kind, phase, sha in _events(log) if kind == "start" and phase == "resolve"]
    assert sent_again and not set(sent_again) & finished  # 0 finished chat calls repeated
    assert len(sent_again) == 2  # the blocked turn and the last one

    fresh_task = tmp_path / "fresh" / "quarterly_report"
    shutil.copytree(materialized["quarterly_report"]["dir"], fresh_task)
    assert _driver(fresh_task, tmp_path / "fresh-runs", tmp_path / "fresh.sqlite3", tmp_path / "fresh.log").wait(timeout=120) == 0
    resumed = _files(tmp_path / "runs" / "quarterly_report" / "r" / "sessions" / "resolve")
    uninterrupted = _files(tmp_path / "fresh-runs" / "quarterly_report" / "r" / "sessions" / "resolve")
    assert resumed == uninterrupted and {"notes/plan.md", "calc.txt", "ledger.json"} <= set(resumed)
