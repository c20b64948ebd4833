"""Resource limits of one jailed session: memory, processes, CPU, scratch and output sizes.

Memory and the process count come from a cgroup made for the session alone (cgroup v1 memory +
pids controllers, or cgroup v2 with both delegated) when one can be created here; otherwise
from rlimits (``RLIMIT_AS`` stands in for memory and counts reserved address space too;
``RLIMIT_NPROC`` counts the session's own user, which is unique to the session). The CPU quota
(``cpus``: the CPUs the whole session may keep busy at once) is the cgroup cpu controller's
bandwidth limit, ``cpu.cfs_quota_us`` on v1 and ``cpu.max`` on v2, where that controller is
writable too; elsewhere it is not enforced and the limits line says so. CPU time
(``RLIMIT_CPU``, per process) and the largest file (``RLIMIT_FSIZE`` = the output cap) are
rlimits in both cases. Sizes of the scratch tmpfs and of the output folder are tmpfs sizes::

    limits = JailLimits(memory_bytes=parse_size("1G"), pids=128, cpus=1.0)   # parse_size: veriscale.sizes
    with ResourceBox(limits) as box:
        box.kind             # 'cgroup v1', 'cgroup v2' or 'rlimits'
        box.cpu_via          # 'cgroup v1 cpu.cfs_quota_us', 'cgroup v2 cpu.max' or None
        box.enter_files      # cgroup.procs files the session's first process joins
        ...
        box.memory_killed()  # True when the kernel killed a process for the memory limit
        box.cpu_usage()      # CpuUsage(seconds=..., throttled=...) from the cgroup's counters
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import re
import signal
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from veriscale import settings
from veriscale.errors import UserError, setting
from veriscale.sizes import GIB, MIB

#: Bandwidth period of the CPU quota (microseconds); the quota is ``cpus`` times it.
CPU_PERIOD_US = 100_000
MIN_CPUS, MAX_CPUS = 0.01, 1024.0

#: Host user ids given to sessions when veriscale runs as root: base + a slot free at the time.
JAIL_UID_BASE = int(settings.value("jail_uid_base"))  # $VERISCALE_JAIL_UID_BASE
JAIL_UID_SLOTS = 10_000


@dataclass(frozen=True)
class JailLimits:
    """Per-session limits; each has a flag on ``harness run`` and ``harness jail-run``."""

    memory_bytes: int = 2 * GIB       # --jail-memory
    pids: int = 256                   # --jail-pids
    cpu_s: int = 900                  # --jail-cpu (CPU seconds per process)
    tmpfs_bytes: int = 256 * MIB      # --jail-tmpfs (/tmp, /var/tmp, /run, $HOME, /dev/shm, each)
    output_bytes: int = 512 * MIB     # --jail-output (the session's output folder)
    capture_bytes: int = 4 * MIB      # --jail-capture (stdout and stderr, each: head and tail kept)
    relay_connections: int = 16       # --relay-connections (open model connections at once)
    cpus: float = 1.0                 # --jail-cpus (CPU quota of the whole session, in CPUs)

    def __post_init__(self) -> None:
        cpus = self.cpus
        if isinstance(cpus, bool) or not isinstance(cpus, (int, float)) or not MIN_CPUS <= cpus <= MAX_CPUS:
            raise UserError(f"jail CPU quota cpus={cpus!r} is not a number of CPUs from {MIN_CPUS} to {MAX_CPUS}: "
                            f"give e.g. {setting('jail_cpus', '1')}")
        for name, value in asdict(self).items():
            if name == "cpus":
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise UserError(f"jail limit {name}={value!r} is not a positive whole number: give e.g. 256")
        if self.tmpfs_bytes < MIB or self.output_bytes < MIB:
            raise UserError(f"jail tmpfs and output sizes must be at least 1M: give e.g. {setting('jail_output', '256M')}")

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass(frozen=True)
class CpuUsage:
    """What a session's cgroup counted: CPU ``seconds`` used and periods ``throttled`` (None: not counted)."""

    seconds: float
    throttled: int | None


# --- cgroups ------------------------------------------------------------------------------


def _mounts() -> list[tuple[str, str, str, str]]:
    """(mount root, mount point, fs type, super options) of every mount of this process."""
    rows = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) >= 5 and len(tail) >= 3:
                rows.append((fields[3], fields[4], tail[0], tail[2]))
    return rows


def _own_cgroups() -> dict[str, str]:
    """controller (or '' for v2) -> this process's cgroup path."""
    found = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                found[name] = path
    return found


def _cgroup_dir(mount_root: str, mount_point: str, path: str) -> Path:
    rel = os.path.relpath(path, mount_root) if path.startswith(mount_root) else path.lstrip("/")
    return Path(mount_point) / ("" if rel == "." else rel)


def _v1_dirs() -> dict[str, Path] | None:
    """controller -> this process's v1 cgroup folder: memory and pids (else None), cpu and cpuacct if mounted."""
    own = _own_cgroups()
    dirs = {}
    for controller in ("memory", "pids", "cpu", "cpuacct"):
        mount = next((m for m in _mounts() if m[2] == "cgroup" and controller in m[3].split(",")), None)
        if mount is None or controller not in own:
            if controller in ("memory", "pids"):
                return None
            continue
        dirs[controller] = _cgroup_dir(mount[0], mount[1], own[controller])
    return dirs


def _v2_dir() -> Path | None:
    mount = next((m for m in _mounts() if m[2] == "cgroup2"), None)
    own = _own_cgroups().get("")
    if mount is None or own is None:
        return None
    return _cgroup_dir(mount[0], mount[1], own)


_counter = itertools.count()


class ResourceBox:
    """A cgroup for one session (or the rlimit fallback); see the module docstring."""

    def __init__(self, limits: JailLimits) -> None:
        self.limits = limits
        self.kind = "rlimits"
        self.enter_files: list[str] = []
        self.cpu_via: str | None = None
        self._dirs: list[Path] = []
        self._oom_files: list[Path] = []
        self._usage_file: Path | None = None   # cpuacct.usage (ns, v1) or cpu.stat (usage_usec, v2)
        self._throttle_file: Path | None = None  # cpu.stat (nr_throttled)

    def __enter__(self) -> "ResourceBox":
        name = f"veriscale-{os.getpid()}-{next(_counter)}"
        with contextlib.suppress(OSError):
            v1 = _v1_dirs()
            if v1 and self._make_v1(v1, name):
                return self
        with contextlib.suppress(OSError):
            v2 = _v2_dir()
            if v2 and self._make_v2(v2, name):
                return self
        self._cleanup()
        self.kind = "rlimits"
        return self

    def _make_v1(self, dirs: dict[str, Path], name: str) -> bool:
        memory, pids = dirs["memory"] / name, dirs["pids"] / name
        for folder in (memory, pids):
            folder.mkdir()
            self._dirs.append(folder)
        (memory / "memory.limit_in_bytes").write_text(str(self.limits.memory_bytes))
        with contextlib.suppress(OSError):  # no swap accounting on many hosts
            (memory / "memory.memsw.limit_in_bytes").write_text(str(self.limits.memory_bytes))
        (pids / "pids.max").write_text(str(self.limits.pids))
        self.enter_files = [str(memory / "cgroup.procs"), str(pids / "cgroup.procs")]
        self._oom_files = [memory / "memory.oom_control", memory / "memory.failcnt"]
        self.kind = "cgroup v1"
        with contextlib.suppress(OSError):  # memory and pids hold without it; the limits line says so
            self._make_v1_cpu(dirs, name)
        return True

    def _make_v1_cpu(self, dirs: dict[str, Path], name: str) -> None:
        if "cpu" not in dirs:
            return
        made: list[Path] = []
        for controller in ("cpu", "cpuacct"):  # one folder when both share a mount (cpu,cpuacct)
            folder = dirs[controller] / name if controller in dirs else None
            if folder is not None and folder not in made:
                folder.mkdir()
                self._dirs.append(folder)
                made.append(folder)
        cpu = dirs["cpu"] / name
        (cpu / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
        (cpu / "cpu.cfs_quota_us").write_text(str(_quota_us(self.limits.cpus)))
        self.enter_files += [str(folder / "cgroup.procs") for folder in made]
        self._throttle_file = cpu / "cpu.stat"
        if "cpuacct" in dirs:
            self._usage_file = dirs["cpuacct"] / name / "cpuacct.usage"
        self.cpu_via = "cgroup v1 cpu.cfs_quota_us"

    def _make_v2(self, parent: Path, name: str) -> bool:
        folder = parent / name
        folder.mkdir()
        self._dirs.append(folder)
        if not (folder / "memory.max").exists() or not (folder / "pids.max").exists():
            return False  # memory/pids not delegated to this subtree
        (folder / "memory.max").write_text(str(self.limits.memory_bytes))
        with contextlib.suppress(OSError):
            (folder / "memory.swap.max").write_text("0")
        (folder / "pids.max").write_text(str(self.limits.pids))
        self.enter_files = [str(folder / "cgroup.procs")]
        self._oom_files = [folder / "memory.events"]
        self.kind = "cgroup v2"
        self._usage_file = folder / "cpu.stat"  # usage_usec is counted with or without the cpu controller
        if (folder / "cpu.max").exists():  # the cpu controller is delegated to this subtree
            with contextlib.suppress(OSError):
                (folder / "cpu.max").write_text(f"{_quota_us(self.limits.cpus)} {CPU_PERIOD_US}")
                self._throttle_file = folder / "cpu.stat"
                self.cpu_via = "cgroup v2 cpu.max"
        return True

    def cpu_usage(self) -> CpuUsage | None:
        """CPU seconds the session's cgroup used so far and periods it was throttled (None: no counter)."""
        seconds: float | None = None
        throttled: int | None = None
        with contextlib.suppress(OSError, ValueError):
            if self._usage_file is not None:
                text = self._usage_file.read_text()
                if self._usage_file.name == "cpuacct.usage":
                    seconds = int(text.strip()) / 1e9
                else:
                    seconds = int(_stat_field(text, "usage_usec")) / 1e6
            if self._throttle_file is not None:
                throttled = int(_stat_field(self._throttle_file.read_text(), "nr_throttled"))
        return None if seconds is None else CpuUsage(seconds=seconds, throttled=throttled)

    def memory_killed(self) -> bool:
        """Whether the memory limit made the kernel kill (or refuse memory to) a session process."""
        for path in self._oom_files:
            with contextlib.suppress(OSError):
                text = path.read_text()
                if path.name == "memory.failcnt":
                    continue
                match = re.search(r"oom_kill (\d+)", text)
                if match and int(match.group(1)) > 0:
                    return True
        return False

    def kill_all(self) -> None:
        """SIGKILL every process still in the session's cgroup."""
        for folder in self._dirs:
            with contextlib.suppress(OSError, ValueError):
                for pid in (folder / "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(int(pid), signal.SIGKILL)

    def _cleanup(self) -> None:
        for folder in reversed(self._dirs):
            for _ in range(50):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    self.kill_all()
                    time.sleep(0.02)
        self._dirs.clear()

    def __exit__(self, *exc: object) -> None:
        self.kill_all()
        self._cleanup()

    def describe(self) -> str:
        """One line naming what enforces each limit in this box."""
        return describe_limits(self.limits, self.kind, cpu_via=self.cpu_via or "")


def _quota_us(cpus: float) -> int:
    return max(1000, round(cpus * CPU_PERIOD_US))  # the kernel's smallest quota is 1 ms


def _stat_field(text: str, name: str) -> str:
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == name:
            return value.strip()
    raise ValueError(f"no {name} in cpu.stat")


def expected_mechanism() -> str:
    """What a :class:`ResourceBox` made now would use, found without creating anything.

    ``'cgroup v1'`` or ``'cgroup v2'`` when this process may create a child cgroup with memory and
    pids limits, else ``'rlimits'``. Each session's :class:`JailResult` says what it really got.
    """
    with contextlib.suppress(OSError):
        v1 = _v1_dirs()
        if v1 and all(v1[c].is_dir() and os.access(v1[c], os.W_OK) for c in ("memory", "pids")):
            return "cgroup v1"
    with contextlib.suppress(OSError):
        v2 = _v2_dir()
        if v2 and os.access(v2, os.W_OK):
            delegated = (v2 / "cgroup.subtree_control").read_text().split()
            if "memory" in delegated and "pids" in delegated:
                return "cgroup v2"
    return "rlimits"


def describe_limits(limits: JailLimits, kind: str, cpu_via: str | None = None) -> str:
    """One line naming what enforces each limit, e.g. for ``jail-run`` and the run log.

    ``cpu_via`` is what holds the CPU quota ('' when nothing does); None (the up-front line, before
    any cgroup exists) says it is the cgroup cpu controller where that is writable.
    """
    memory = "cgroup" if kind != "rlimits" else "RLIMIT_AS (address space)"
    pids = "cgroup" if kind != "rlimits" else "RLIMIT_NPROC"
    if cpu_via is None:
        cpu_via = "cgroup cpu controller, where writable" if kind != "rlimits" else ""
    unit = "CPU" if limits.cpus == 1 else "CPUs"
    quota = f"CPU quota {limits.cpus:g} {unit} ({cpu_via or 'not enforced: no writable cgroup cpu controller here'})"
    return (f"jail limits via {kind}: memory {limits.memory_bytes // MIB} MiB ({memory}), "
            f"{limits.pids} processes ({pids}), {quota}, CPU {limits.cpu_s} s per process, output folder "
            f"{limits.output_bytes // MIB} MiB, scratch tmpfs {limits.tmpfs_bytes // MIB} MiB each, "
            f"captured output {limits.capture_bytes // MIB} MiB per stream, "
            f"{limits.relay_connections} model connections")


# --- a host uid per session (root callers) ------------------------------------------------


class UidSlot:
    """A host uid no other live session holds (lock file per slot); use as a context manager."""

    def __init__(self) -> None:
        self.uid = -1
        self._fd: int | None = None

    def __enter__(self) -> "UidSlot":
        folder = Path("/run/veriscale-jail") if os.access("/run", os.W_OK) else Path(tempfile.gettempdir()) / "veriscale-jail"
        folder.mkdir(mode=0o700, exist_ok=True)
        start = (os.getpid() * 7919) % JAIL_UID_SLOTS
        for step in range(JAIL_UID_SLOTS):
            slot = (start + step) % JAIL_UID_SLOTS
            fd = os.open(folder / f"uid-{slot}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self._fd, self.uid = fd, JAIL_UID_BASE + slot
            return self
        raise UserError(f"all {JAIL_UID_SLOTS} jail user ids are in use: wait for sessions to finish")

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
