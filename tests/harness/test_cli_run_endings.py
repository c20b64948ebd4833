"""Ctrl-C and SIGTERM end a `veriscale harness run` promptly, as they end select and track: the
model call in flight is cancelled and recorded, no jailed process is left, the run and its task
end `cancelled`, and the session's host copy is left as it was.

Real `veriscale harness run` child processes (builtin executor, jail on) against a chat double
on 127.0.0.1 (tests/support/fault_server.py) that holds every request: a model that never answers.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.support.fault_server import FaultServer

GUARD_S = 120  # hang guard: far above what any step takes
EXIT_BOUND_S = 60  # how long the stopped command may take to exit (the machine is loaded: generous)
MARK = "veriscale-harness-stop-test"


def _env(store: Path) -> dict[str, str]:
    return {**os.environ, "VERISCALE_CONFIG": "", "VERISCALE_STORE": str(store)}


def _start(task: Path, srv: FaultServer, store: Path, *extra: str, **env: str) -> subprocess.Popen:
    # A suite started in the background runs with SIGINT ignored: give the child the default.
    return subprocess.Popen([sys.executable, "-m", "veriscale", "harness", "run", str(task),
                             "--model", srv.url + "#fault-model", "--run-id", "r", "--contract", "pick-only", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**_env(store), **env},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _pids_with(text: str) -> list[int]:
    """Processes on the host whose command line carries ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(os.getpid()):
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, process group) of ``pid``, None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return fields[0], int(fields[2])
    except (OSError, IndexError, ValueError):
        return None


def _running(pid: int) -> bool:
    """Whether ``pid`` is still a live process (a killed one waiting to be reaped is not)."""
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def _live_in_groups(groups: set[int]) -> list[int]:
    """Live processes in any of the process groups ``groups``."""
    return [int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()
            and (stat := _stat(int(e.name))) is not None and stat[1] in groups and _running(int(e.name))]


def _jailed(marker: str, harness: subprocess.Popen | None = None) -> tuple[list[int], set[int]]:
    """The live processes whose command line carries ``marker`` (not the harness run itself),
    and their process groups (not this test's own)."""
    pids = [pid for pid in _pids_with(marker) if _running(pid) and (harness is None or pid != harness.pid)]
    return pids, {stat[1] for pid in pids if (stat := _stat(pid)) is not None} - {os.getpgrp()}


def _launchers(harness: subprocess.Popen) -> tuple[list[int], set[int]]:
    """The live bubblewrap processes descended from the harness run, and their process groups (their
    command lines no longer name any host path: bubblewrap reads its options from a descriptor)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    below, frontier = set(), {harness.pid}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - below
        below |= frontier
    pids = []
    for pid in sorted(below):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "bwrap" and _running(pid):
                pids.append(pid)
        except OSError:
            pass
    return pids, {stat[1] for pid in pids if (stat := _stat(pid)) is not None} - {os.getpgrp()}


def _calls(store: Path, kind: str = "chat") -> dict[str, int]:
    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5)
    try:
        return dict(con.execute("select status, count(*) from calls where kind = ? group by status", (kind,)).fetchall())
    finally:
        con.close()


def _runs(store: Path) -> dict[str, dict]:
    """Each store run by its command: status and recorded error."""
    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5)
    try:
        rows = con.execute("select command, status, result from runs").fetchall()
    finally:
        con.close()
    return {command: {"status": status, "error": json.loads(result or "{}").get("error", "")}
            for command, status, result in rows}


def _phases(task: Path) -> dict[str, str]:
    folder = task.parent / f"{task.name}.runs" / "r" / "phases"
    return {p.stem: json.loads(p.read_text())["status"] for p in folder.glob("*.json")}


def _wait_for(ready, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + GUARD_S
    while not ready():
        assert proc.poll() is None, f"the run ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"the run never reached {what}"
        time.sleep(0.1)


def _stop_and_check(proc: subprocess.Popen, sig: int, code: int, words: str, store: Path) -> str:
    proc.send_signal(sig)
    try:
        _, stderr = proc.communicate(timeout=EXIT_BOUND_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"harness run did not exit within {EXIT_BOUND_S} s of {signal.Signals(sig).name}")
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr and "a rerun resumes" in stderr, stderr
    runs = _runs(store)
    assert runs["harness run"]["status"] == "cancelled" and words in runs["harness run"]["error"], runs
    assert runs["harness task"]["status"] == "cancelled" and words in runs["harness task"]["error"], runs
    return stderr


@pytest.mark.parametrize(("sig", "code", "words"), [(signal.SIGINT, 130, "Ctrl-C"), (signal.SIGTERM, 143, "SIGTERM")])
def test_a_stop_while_sessions_wait_on_the_model_cancels_the_calls_and_the_run(materialized, tmp_path, sig, code, words):
    task = tmp_path / "quarterly_report"
    shutil.copytree(materialized["quarterly_report"]["dir"], task)
    store = tmp_path / "s.sqlite3"
    with FaultServer(chat_reply="done") as srv:
        srv.hold_after(0)  # every chat request is held: the sessions wait on the model
        proc = _start(task, srv, store)
        _wait_for(lambda: sum(r["path"].endswith("/chat/completions") for r in srv.requests) >= 2, proc,
                  "both sessions waiting on the model")
        _stop_and_check(proc, sig, code, words, store)
    calls = _calls(store)
    assert calls.get("cancelled", 0) >= 2 and set(calls) <= {"cancelled"}, calls  # every started call, cancelled
    assert _phases(task) == {"resolve": "cancelled", "challenge": "cancelled"}


@pytest.mark.parametrize(("sig", "code", "words"), [(signal.SIGINT, 130, "Ctrl-C"), (signal.SIGTERM, 143, "SIGTERM")])
def test_a_stop_kills_the_jailed_command_and_leaves_the_host_copy_as_it_was(materialized, tmp_path, sig, code, words):
    task = tmp_path / "quarterly_report"
    shutil.copytree(materialized["quarterly_report"]["dir"], task)
    store = tmp_path / "s.sqlite3"
    mark = f"{MARK}-{uuid.uuid4().hex}"  # this test's own commands, not another run's
    command = f"echo partial > partial.txt; sleep 600 # {mark}"
    reply = {"content": "", "tool_calls": [{"id": "t1", "type": "function",
                                            "function": {"name": "run", "arguments": json.dumps({"command": command})}}]}
    with FaultServer(chat_reply=reply) as srv:
        proc = _start(task, srv, store)
        _wait_for(lambda: len(_jailed(mark)[0]) >= 2, proc, "both sessions running a jailed command")
        jailed, groups = _launchers(proc)  # the sessions' bubblewrap launchers
        _stop_and_check(proc, sig, code, words, store)
    assert len(groups) >= 2 and not [pid for pid in jailed if _running(pid)], "a jailed process outlived the run"
    assert _live_in_groups(groups) == [] and _jailed(mark) == ([], set())
    assert _phases(task) == {"resolve": "cancelled", "challenge": "cancelled"}
    sessions = task.parent / "quarterly_report.runs" / "r" / "sessions"
    left = sorted(p.relative_to(sessions).as_posix() for p in sessions.rglob("partial.txt"))
    assert left == [], f"a stopped session's output was handed back: {left}"


def _pi_cli() -> Path:
    """The pi the project installs (`npm install --prefix .tools @mariozechner/pi-coding-agent@0.73.1`)."""
    from veriscale.errors import UserError
    from veriscale.harness.sessions.executors import find_pi

    try:
        return find_pi()
    except UserError as exc:
        pytest.fail(str(exc))


def test_sigint_kills_a_jailed_pi_waiting_on_the_relay_and_records_its_call_cancelled(materialized, tmp_path):
    cli = _pi_cli()
    task = tmp_path / "quarterly_report"
    shutil.copytree(materialized["quarterly_report"]["dir"], task)
    store = tmp_path / "s.sqlite3"
    with FaultServer(chat_reply="done") as srv:
        srv.hold_after(0)  # pi's requests reach the model through the relay and are held there
        proc = _start(task, srv, store, "--executor", "pi", VERISCALE_PI=str(cli))
        _wait_for(lambda: sum(r["path"].endswith("/chat/completions") for r in srv.requests) >= 2, proc,
                  "both pi sessions waiting on the model")
        jailed, groups = _launchers(proc)  # the sessions' bubblewrap launchers
        _stop_and_check(proc, signal.SIGINT, 130, "Ctrl-C", store)
    assert len(groups) >= 2 and not [pid for pid in jailed if _running(pid)], "a jailed pi outlived the run"
    assert _live_in_groups(groups) == [], "a process of a jailed pi's group outlived the run"
    calls = _calls(store, "relay")
    assert calls.get("cancelled", 0) >= 2 and set(calls) <= {"cancelled"}, calls
    assert _phases(task) == {"resolve": "cancelled", "challenge": "cancelled"}
