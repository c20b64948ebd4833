"""Is a ``running`` run still alive? The process that owns it, its heartbeat, and the verdict.

Every run records who runs it (host, boot id, pid and the pid's start time, so a reused pid is
told apart) and a heartbeat its process refreshes while the run is open
(:mod:`veriscale.engine.run_scope` beats it). A run still marked ``running`` is *dead*, and is
rewritten as ``interrupted``, as soon as its process is gone when that process is of this host
and boot (killed with SIGKILL: no need to wait for its heartbeat); a run of this host before its
last reboot is dead once its heartbeat is stale; a run owned by another host (or by a store older
than heartbeats) is judged by its heartbeat alone, with a ten times longer threshold, since its
process cannot be seen from here::

    owner = ProcessIdentity.current()       # host, boot_id, pid, start (clock ticks after boot)
    owner.alive()                           # this exact process still runs (pid reuse told apart)
    settle_dead_runs(store)                 # every dead `running` run -> interrupted; their ids
    settle_dead_runs(store, [run_id])       # only these

``VERISCALE_RUN_STALE_S`` (seconds, default 30) is the heartbeat threshold; a run's heartbeat
beats every quarter of it, at most every 5 s.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from veriscale import settings


class RunTable(Protocol):
    """What :func:`settle_dead_runs` needs of a store (``veriscale.engine.store.Store`` is one)."""

    @property
    def read_only(self) -> bool: ...

    def running_runs(self, run_ids: Iterable[int] | None = None) -> list[dict[str, Any]]: ...

    def interrupt_run(self, run_id: int, *, heartbeat_at: float | None, error: str) -> bool: ...

STALE_ENV = "VERISCALE_RUN_STALE_S"
DEFAULT_STALE_S = 30.0
OTHER_HOST_FACTOR = 10.0  # a run of another host (or with no owner recorded) waits this many thresholds
MAX_BEAT_S = 5.0


def stale_after_s() -> float:
    """The heartbeat age after which a run on this host with no live process is dead."""
    return float(settings.value("run_stale_s"))  # --run-stale-s, runs.stale_s, $VERISCALE_RUN_STALE_S, 30


def beat_every_s(stale_s: float | None = None) -> float:
    """How often an open run's heartbeat is refreshed: a quarter of the threshold, at most 5 s."""
    return min(MAX_BEAT_S, (stale_s if stale_s is not None else stale_after_s()) / 4)


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="ascii", errors="replace")
    except OSError:
        return None


def _boot_id() -> str | None:
    """The kernel's boot id and this process's pid namespace: a pid is only meaningful within
    one (two containers with one host name and kernel, sharing a store, see different pids), so
    only a run of the same boot *and* pid namespace is judged by its process."""
    boot = (_read("/proc/sys/kernel/random/boot_id") or "").strip()
    if not boot:
        return None
    try:
        return f"{boot}/pidns{os.stat('/proc/self/ns/pid').st_ino}"  # no ':' (lease owners split on it)
    except OSError:
        return boot


def process_start(pid: int) -> int | None:
    """Field 22 of ``/proc/<pid>/stat``: when the process started, in clock ticks after boot
    (None without /proc or without that process). The name field may hold spaces or ')'."""
    text = _read(f"/proc/{pid}/stat")
    if not text or ")" not in text:
        return None
    fields = text.rsplit(")", 1)[1].split()  # fields 3 onwards
    try:
        return int(fields[22 - 3])
    except (IndexError, ValueError):
        return None


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process, but there is one
    except (OSError, OverflowError):
        return False
    return True


_HERE: dict[int, ProcessIdentity] = {}


@dataclass(frozen=True)
class ProcessIdentity:
    """Who owns a run. ``start`` is None where /proc is missing (then the pid alone is checked)."""

    host: str | None
    boot_id: str | None
    pid: int | None
    start: int | None

    @classmethod
    def current(cls) -> ProcessIdentity:
        pid = os.getpid()
        if _HERE.get(pid) is None:  # once per process (a forked child has its own)
            _HERE.clear()
            _HERE[pid] = cls(socket.gethostname(), _boot_id(), pid, process_start(pid))
        return _HERE[pid]

    def same_machine(self) -> bool:
        """Recorded on this host since its last boot (where the boot id is known on both sides)."""
        here = ProcessIdentity.current()
        return self.host is not None and self.host == here.host and self.boot_id == here.boot_id

    def alive(self) -> bool:
        """This very process still runs here: same host and boot, the pid exists, same start time."""
        if self.pid is None or not self.same_machine():
            return False
        if self.start is None:
            return _pid_exists(self.pid)
        return process_start(self.pid) == self.start


def is_dead(owner: ProcessIdentity, heartbeat_at: float | None, created_at: float, *, now: float | None = None,
            stale_s: float | None = None) -> bool:
    """The verdict for one ``running`` run (see the module docstring)."""
    if owner.host is not None and owner.pid is not None and owner.same_machine():
        return not owner.alive()  # its process is seen from here: gone (or its pid reused) is dead at once
    now = time.time() if now is None else now
    stale_s = stale_after_s() if stale_s is None else stale_s
    age = now - (heartbeat_at if heartbeat_at is not None else created_at)
    if age <= stale_s:
        return False
    if owner.host is not None and owner.host == ProcessIdentity.current().host:
        return True  # this host rebooted since (another boot id): nothing of it lives on
    return age > stale_s * OTHER_HOST_FACTOR


def settle_dead_runs(store: RunTable, run_ids: Iterable[int] | None = None) -> list[int]:
    """Rewrite every dead ``running`` run (of ``run_ids``, or all) as ``interrupted``; their ids.

    The rewrite only lands if the run is still ``running`` with the heartbeat that was judged,
    so a run that just beat or ended is left alone."""
    stale_s, now = stale_after_s(), time.time()
    settled: list[int] = []
    if store.read_only:
        return settled  # a read-only store shows its runs as they were written
    for row in store.running_runs(run_ids):
        owner = ProcessIdentity(row["host"], row["boot_id"], row["pid"], row["pid_start"])
        if not is_dead(owner, row["heartbeat_at"], row["created_at"], now=now, stale_s=stale_s):
            continue
        where = f"pid {owner.pid} on {owner.host}" if owner.host else "its process"
        beat = row["heartbeat_at"] if row["heartbeat_at"] is not None else row["created_at"]
        gone = ("is gone" if owner.host is not None and owner.pid is not None and owner.same_machine()
                else f"sent no heartbeat for {max(0.0, now - beat):.0f} s")
        error = (f"the run's process ({where}) stopped without ending it: it {gone}; "
                 "a rerun resumes from the calls it saved")
        if store.interrupt_run(row["id"], heartbeat_at=row["heartbeat_at"], error=error):
            settled.append(row["id"])
    return settled
