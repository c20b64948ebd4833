"""A hang guard for child processes that does not depend on how fast or loaded the machine is.

A wall-clock limit fires on a correct run when CI is slow. This guard watches the CPU time the
child (and its own children) spend instead: a run that is working keeps spending CPU, however
slowly the machine schedules it; a hang either spends none (blocked on a FIFO, a lock, a
socket) or spins. So the child is stopped when its CPU time has not moved for ``idle_s``
seconds of wall time, or when it has spent more than ``cpu_budget_s`` CPU seconds::

    proc = guarded_run([sys.executable, "-m", "veriscale", "track", ...], capture_output=True, text=True)

A child that waits on purpose (for stdin, for a signal) is no hang: give it ``idle_s`` to match.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")


class HangError(AssertionError):
    """The child stopped making progress (or spun past its CPU budget) and was killed."""


def cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid`` and every live descendant (0 once it is gone)."""
    total = 0.0
    for child in [pid, *_descendants(pid)]:
        try:
            with open(f"/proc/{child}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])) / TICK
    return total


def _descendants(pid: int) -> list[int]:
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        try:
            with open(f"/proc/{parent}/task/{parent}/children") as handle:
                kids = [int(k) for k in handle.read().split()]
        except OSError:
            kids = []
        found.extend(kids)
        frontier.extend(kids)
    return found


def watch(proc: subprocess.Popen, *, idle_s: float = 180.0, cpu_budget_s: float = 1800.0) -> threading.Event:
    """Kill ``proc`` when it stops spending CPU for ``idle_s`` or spends over ``cpu_budget_s``;
    the returned event is set when the guard fired."""
    fired = threading.Event()

    def loop() -> None:
        last, since = -1.0, time.monotonic()
        while proc.poll() is None:
            spent = cpu_seconds(proc.pid)
            now = time.monotonic()
            if spent > last + 0.01:
                last, since = spent, now
            if now - since > idle_s or spent > cpu_budget_s:
                fired.set()
                proc.send_signal(signal.SIGKILL)
                return
            time.sleep(0.5)

    threading.Thread(target=loop, daemon=True, name="hang-guard").start()
    return fired


def guarded_run(cmd: list[str], *, idle_s: float = 180.0, cpu_budget_s: float = 1800.0, input: str | None = None,
                **popen: Any) -> subprocess.CompletedProcess:
    """``subprocess.run`` with the guard in place of ``timeout``; raises HangError when it fired."""
    if popen.pop("capture_output", False):
        popen["stdout"] = popen["stderr"] = subprocess.PIPE
    if input is not None:
        popen["stdin"] = subprocess.PIPE
    with subprocess.Popen(cmd, **popen) as proc:
        fired = watch(proc, idle_s=idle_s, cpu_budget_s=cpu_budget_s)
        stdout, stderr = proc.communicate(input)
    if fired.is_set():
        raise HangError(f"{' '.join(map(str, cmd[:6]))} made no progress for {idle_s:g} s (or spun past "
                        f"{cpu_budget_s:g} CPU s) and was killed: a hang")
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
