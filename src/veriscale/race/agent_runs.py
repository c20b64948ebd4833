"""Run one agent command N times at once, each in its own worktree and process group.

    repo = find_repo(Path.cwd())
    runs = run_race(repo, ["sh", "-c", "echo hi > hi.txt"], n=3, timeout_s=600,
                    task_file=Path("task.md"), on_finished=lambda run: print(run.id, run.exit_code))
    runs[0].diff.patch, runs[0].exit_code, runs[0].wall_s, runs[0].stdout_tail

Each run gets the worktree as its cwd, ``VERISCALE_RACE_INDEX`` (0..N-1), ``VERISCALE_RACE_N``
and ``VERISCALE_RACE_TASK`` (the task file's absolute path) in its environment, no stdin, and a
session of its own, so a Ctrl-C at the terminal reaches veriscale only. A run past
``timeout_s`` has its process group killed and is flagged ``timed_out``. When a run ends its
group is killed too (nothing it left in the background outlives it). Whatever happens (a
finish, an error, Ctrl-C, SIGTERM) every agent group is killed and every worktree removed
before ``run_race`` returns or raises.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from veriscale.race.interrupts import interrupts_deferred, signals_raise_interrupt
from veriscale.race.worktrees import Diff, Repo, Worktrees, capture_diff, worktree_env

POLL_S = 0.05
TERM_GRACE_S = 3.0
TAIL_BYTES = 64 * 1024
NOT_FOUND_EXIT = 127


@dataclass
class RunResult:
    """One finished run: how it ended, what it printed, what it changed."""

    index: int
    command: list[str]
    exit_code: int
    wall_s: float
    timed_out: bool = False
    stdout_tail: str = ""
    stderr_tail: str = ""
    diff: Diff = field(default_factory=Diff)
    trajectory_text: str | None = None  # the file at --trajectory REL, read before cleanup
    trajectory_name: str = ""

    @property
    def id(self) -> str:
        return f"run-{self.index}"

    @property
    def failed(self) -> bool:
        return self.timed_out or self.exit_code != 0

    @property
    def status(self) -> str:
        """``ok``, ``exit N`` or ``timed out`` (for tables and reports)."""
        return "timed out" if self.timed_out else ("ok" if self.exit_code == 0 else f"exit {self.exit_code}")

    def last_lines(self, stream: str = "stderr", n: int = 5) -> list[str]:
        text = self.stderr_tail if stream == "stderr" else self.stdout_tail
        return [line for line in text.rstrip().splitlines() if line.strip()][-n:]


@dataclass
class _Live:
    index: int
    proc: subprocess.Popen | None
    started: float
    out: Path
    err: Path
    exit_code: int | None = None
    wall_s: float = 0.0
    timed_out: bool = False
    reaped: bool = False


def run_race(repo: Repo, command: Sequence[str], n: int, *, timeout_s: float, task_file: Path | None = None,
             trajectory: str | None = None, on_started: Callable[[list[Path]], None] | None = None,
             on_finished: Callable[[RunResult], None] | None = None,
             temp_root: str | Path | None = None) -> list[RunResult]:
    """Run ``command`` ``n`` times concurrently in detached worktrees of ``repo.head``.

    ``trajectory``: a path inside each worktree the agent may write its trajectory to; it is
    read before the worktree goes and left out of the diff. ``on_started(worktree paths)`` is
    called once every agent is running; ``on_finished(run)`` as each one ends (its diff not yet
    taken). Results come back in index order, each with its diff.
    """
    command = list(command)
    with signals_raise_interrupt(), Worktrees(repo, n, temp_root) as trees:
        logs = trees.logs
        live: list[_Live] = []
        try:
            for i, path in enumerate(trees.paths):
                live.append(_start(i, command, path, logs, task_file, n))
            if on_started:
                on_started(list(trees.paths))
            pending = [run for run in live if run.exit_code is None]
            for run in live:
                if run.exit_code is not None and on_finished:  # the command could not start at all
                    on_finished(_result(run, command))
            while pending:
                time.sleep(POLL_S)
                for run in list(pending):
                    if _check(run, timeout_s):
                        pending.remove(run)
                        if on_finished:
                            on_finished(_result(run, command))
        finally:
            with interrupts_deferred():
                _stop_all(live)
        results = []
        with interrupts_deferred():
            for run, path in zip(live, trees.paths):
                result = _result(run, command)
                result.diff = capture_diff(path, repo.head, exclude=trajectory)
                if trajectory:
                    result.trajectory_name = Path(trajectory).name
                    result.trajectory_text = _read_inside(path, trajectory)
                results.append(result)
        return results


def _start(index: int, command: list[str], cwd: Path, logs: Path, task_file: Path | None, n: int) -> _Live:
    out, err = logs / f"run-{index}.stdout", logs / f"run-{index}.stderr"
    env = worktree_env({"VERISCALE_RACE_INDEX": str(index), "VERISCALE_RACE_N": str(n)})
    if task_file is not None:
        env["VERISCALE_RACE_TASK"] = str(task_file.resolve())
    started = time.monotonic()
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        try:
            proc = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=stdout,
                                    stderr=stderr, start_new_session=True)
        except OSError as exc:  # not found, not executable: the run fails, the race goes on
            stderr.write(f"veriscale race: cannot start {command[0]!r}: {exc.strerror}\n".encode())
            return _Live(index, None, started, out, err, exit_code=NOT_FOUND_EXIT, reaped=True)
    return _Live(index, proc, started, out, err)


def _check(run: _Live, timeout_s: float) -> bool:
    """True once ``run`` has ended (by itself, or killed for running past ``timeout_s``)."""
    assert run.proc is not None
    code = run.proc.poll()
    elapsed = time.monotonic() - run.started
    if code is None and elapsed <= timeout_s:
        return False
    if code is None:
        run.timed_out = True
        _kill_group(run.proc.pid, signal.SIGKILL)
        code = run.proc.wait()
    _kill_group(run.proc.pid, signal.SIGKILL)  # whatever it left running in the background
    run.exit_code, run.wall_s, run.reaped = code, elapsed, True
    return True


def _stop_all(live: list[_Live]) -> None:
    """SIGTERM every group still running, SIGKILL what is left after a grace, reap them all."""
    running = [run for run in live if run.proc is not None and not run.reaped]
    for run in running:
        _kill_group(run.proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + TERM_GRACE_S
    for run in running:
        with contextlib.suppress(subprocess.TimeoutExpired):
            run.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    for run in live:
        if run.proc is None:
            continue
        _kill_group(run.proc.pid, signal.SIGKILL)
        code = run.proc.wait()
        if run.exit_code is None:
            run.exit_code, run.wall_s = code, time.monotonic() - run.started
        run.reaped = True


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _result(run: _Live, command: list[str]) -> RunResult:
    return RunResult(index=run.index, command=command, exit_code=run.exit_code if run.exit_code is not None else -1,
                     wall_s=round(run.wall_s, 3), timed_out=run.timed_out,
                     stdout_tail=_tail(run.out), stderr_tail=_tail(run.err))


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - TAIL_BYTES))
            data = fh.read()
    except OSError:
        return ""
    text = data.decode("utf-8", "replace")
    return text if size <= TAIL_BYTES else text.split("\n", 1)[-1]


def _read_inside(worktree: Path, rel: str) -> str | None:
    path = (worktree / rel).resolve()
    if not path.is_relative_to(worktree.resolve()) or not path.is_file():
        return None
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
