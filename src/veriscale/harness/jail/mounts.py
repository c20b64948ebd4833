"""The bubblewrap command line of a jail: namespaces, identity and the mount layout.

:func:`bwrap_command` turns a :class:`~veriscale.harness.jail.sandbox.JailSpec` and a command into the
full argv (see :mod:`veriscale.harness.jail.sandbox` for what the session sees)::

    argv = bwrap_command(spec, ["python3", "run.py"], Plan(forward_socket=sock, seccomp_fd=4,
                         harvest_fd=5, drop_to=1900000003, rlimits={"CPU": 900}, deadline_s=120))
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from veriscale.harness.safe_fs import is_within
from veriscale.errors import UserError, setting
from veriscale.harness.jail import jail_inside, jail_relay
from veriscale.harness.jail.netjail import INSIDE_SOCKET_PATH, inside_port

if TYPE_CHECKING:
    from veriscale.harness.jail.sandbox import JailSpec

#: The id the session has inside a user namespace (non-root callers; mapped to the caller).
INSIDE_UID = 1000
INSIDE_GID = 1000
INSIDE_DIR = "/.veriscale"
INSIDE_LAUNCHER = f"{INSIDE_DIR}/inside.py"
INSIDE_SEED = f"{INSIDE_DIR}/seed"
#: Bound read-only when present; symlinks (merged-/usr systems) are recreated as symlinks.
SYSTEM_PATHS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: Folders replaced by fresh, size-capped tmpfs inside.
SCRATCH_DIRS = ("/tmp", "/var/tmp", "/run")
#: Host kernel knobs under /proc that stay read-only (or blank) inside.
PROC_READONLY = ("/proc/sys", "/proc/irq", "/proc/bus", "/proc/fs")
PROC_BLANK = ("/proc/sysrq-trigger", "/proc/kcore", "/proc/timer_list")
#: Container runtime sockets blanked inside even if a bound folder would expose them.
CONTAINER_SOCKETS = (
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/containerd/containerd.sock",
    "/run/podman/podman.sock",
    "/run/crio/crio.sock",
    "/run/buildkit/buildkitd.sock",
)
#: Container runtime programs blanked in every folder of the jail's PATH.
CONTAINER_BINARIES = ("docker", "dockerd", "podman", "nerdctl", "ctr", "containerd", "crictl")


@dataclass(frozen=True)
class Plan:
    """What one run adds to the spec: descriptors, identity, limits, deadline."""

    seccomp_fd: int
    harvest_fd: int
    deadline_s: float
    drop_to: int | None = None            # host uid (root callers); None: user namespace
    rlimits: Mapping[str, int] = field(default_factory=dict)
    forward_socket: Path | None = None
    tmpfs_bytes: int = 256 << 20
    output_bytes: int = 512 << 20
    handback: tuple[int, int] = (20_000, 64)  # most entries, deepest folder the hand-back carries


def bwrap_path() -> str:
    path = shutil.which("bwrap")
    if path is None:
        raise UserError(
            "bubblewrap ('bwrap') is not installed, so sessions cannot be jailed: install it "
            f"(Debian/Ubuntu: apt-get install bubblewrap) or run with the jail off ({setting('no_jail')})"
        )
    return path


@functools.cache
def _supports_disable_userns(bwrap: str) -> bool:
    """bubblewrap >= 0.8 can forbid nested user namespaces inside the jail."""
    help_text = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10)
    return "--disable-userns" in help_text.stdout + help_text.stderr


def namespace_flags(bwrap: str, as_root: bool) -> list[str]:
    """Namespaces and capabilities: root mounts with its own rights, then drops inside."""
    flags = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
             "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if as_root:  # the launcher needs these three to become the session's uid; it drops them for good
        return flags + ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
    flags += ["--unshare-user", "--uid", str(INSIDE_UID), "--gid", str(INSIDE_GID)]
    if _supports_disable_userns(bwrap):
        flags.append("--disable-userns")
    return flags


def unreadable_by_others(root: str) -> tuple[list[str], list[str]]:
    """Files and folders under ``root`` that a user other than owner/group could not read (fresh each call)."""
    files: list[str] = []
    folders: list[str] = []
    for parent, dirnames, filenames in os.walk(root):
        for name in list(dirnames):
            path = os.path.join(parent, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISDIR(mode) and not (mode & stat.S_IROTH and mode & stat.S_IXOTH):
                folders.append(path)
                dirnames.remove(name)
        for name in filenames:
            path = os.path.join(parent, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISREG(mode) and not mode & stat.S_IROTH:
                files.append(path)
    return files, folders



def inside_home() -> str:
    home = os.path.realpath(os.path.expanduser("~"))
    return "/home/session" if home == "/" else home


def interpreter_prefixes() -> list[str]:
    """Python installs outside the system folders (pyenv, venvs), so ``python3`` works inside."""
    prefixes = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)}
    system = [Path(p) for p in SYSTEM_PATHS]
    return sorted(p for p in prefixes if not any(is_within(Path(p), s) for s in system))


def _blank(path: str) -> list[str]:
    """Flags that cover ``path`` inside with an empty folder or an empty read-only file."""
    if os.path.isdir(path) and not os.path.islink(path):
        return ["--tmpfs", path]
    return ["--ro-bind", "/dev/null", path]


def _container_masks(path_var: str) -> list[str]:
    masks: set[str] = set()
    for sock in CONTAINER_SOCKETS:
        if os.path.lexists(sock):
            masks.add(os.path.realpath(sock))
    for folder in path_var.split(":"):
        for name in CONTAINER_BINARIES:
            candidate = os.path.join(folder, name)
            if folder and os.path.lexists(candidate):
                masks.add(os.path.realpath(candidate))
    flags: list[str] = []
    for path in sorted(masks):
        flags += ["--ro-bind", "/dev/null", path]
    return flags


def _tmpfs(path: str, size: int, perms: str = "1777") -> list[str]:
    return ["--perms", perms, "--size", str(size), "--tmpfs", path]


def _system_mounts() -> list[str]:
    cmd: list[str] = []
    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            cmd += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            cmd += ["--ro-bind", path, path]
    secret_files, secret_folders = unreadable_by_others("/etc")
    for path in secret_folders:
        cmd += ["--tmpfs", path]
    for path in secret_files:
        cmd += ["--ro-bind", "/dev/null", path]
    return cmd


def _proc_and_dev(tmpfs_bytes: int) -> list[str]:
    cmd = ["--proc", "/proc"]
    for path in PROC_READONLY:
        if os.path.isdir(path):
            cmd += ["--ro-bind", path, path]
    for path in PROC_BLANK:
        if os.path.exists(path):
            cmd += ["--ro-bind", "/dev/null", path]
    return cmd + ["--dev", "/dev", *_tmpfs("/dev/shm", tmpfs_bytes)]


class _Layout:
    """Collects mounts in order, first making each mount point's missing parents world-traversable.

    bubblewrap makes missing parents 0700 when it runs as root, which would lock the session's
    own uid out of e.g. a task folder below ``/root``.
    """

    def __init__(self) -> None:
        self.cmd: list[str] = []
        self.mounted: list[Path] = []   # host folders bound at their own path, and tmpfs roots
        self.made: set[Path] = set()
        self.tmpfs: set[Path] = set()

    def _covered(self, path: Path) -> bool:
        if path in self.made or path in self.mounted:
            return True
        return any(is_within(path, m) and path.is_dir() for m in self.mounted if m not in self.tmpfs)

    def parents(self, dest: str) -> None:
        for parent in reversed(Path(dest).parents):
            if parent == Path("/") or self._covered(parent):
                continue
            self.cmd += ["--perms", "0755", "--dir", str(parent)]
            self.made.add(parent)

    def add(self, flags: list[str], dest: str) -> None:
        self.parents(dest)
        self.cmd += flags
        self.mounted.append(Path(dest))
        if "--tmpfs" in flags or (flags and flags[0] == "--ro-bind" and flags[1] != dest):
            self.tmpfs.add(Path(dest))  # its contents are not the host's folder of that name


def bwrap_command(spec: "JailSpec", argv: Sequence[str], plan: Plan, env_path: str) -> list[str]:
    """The full bubblewrap command line that runs ``argv`` in the jail ``spec`` describes."""
    bwrap = bwrap_path()
    layout = _Layout()
    layout.cmd += [bwrap, *namespace_flags(bwrap, plan.drop_to is not None), "--hostname", "jail"]
    layout.cmd += _system_mounts() + _proc_and_dev(plan.tmpfs_bytes)
    layout.mounted += [Path(p) for p in (*SYSTEM_PATHS, "/proc", "/dev")]
    for path in SCRATCH_DIRS:
        layout.add(_tmpfs(path, plan.tmpfs_bytes), path)
    layout.cmd += ["--symlink", "../run", "/var/run"]
    layout.add(_tmpfs(inside_home(), plan.tmpfs_bytes), inside_home())
    for prefix in interpreter_prefixes():
        layout.add(["--ro-bind", prefix, prefix], prefix)
    layout.add(["--ro-bind", str(spec.task_dir), str(spec.task_dir)], str(spec.task_dir))
    for path in spec.hidden:
        if os.path.lexists(path):
            layout.add(_blank(str(path)), str(path))
    for path in spec.readonly_extra:
        layout.add(["--ro-bind", str(path), str(path)], str(path))
    layout.add(_tmpfs(str(spec.writable_dir), plan.output_bytes, "0777"), str(spec.writable_dir))
    layout.add(["--ro-bind", str(spec.writable_dir), INSIDE_SEED], INSIDE_SEED)
    layout.add(["--ro-bind", jail_inside.__file__, INSIDE_LAUNCHER], INSIDE_LAUNCHER)
    layout.add(["--ro-bind", jail_relay.__file__, f"{INSIDE_DIR}/jail_relay.py"], f"{INSIDE_DIR}/jail_relay.py")
    relay = None
    if plan.forward_socket is not None and spec.model_endpoint is not None:
        layout.add(["--ro-bind", str(plan.forward_socket), INSIDE_SOCKET_PATH], INSIDE_SOCKET_PATH)
        relay = [INSIDE_SOCKET_PATH, inside_port(spec.model_endpoint), spec.limits.relay_connections]
    cmd = layout.cmd + _container_masks(env_path)
    cmd += ["--remount-ro", "/", "--remount-ro", "/dev", "--seccomp", str(plan.seccomp_fd),
            "--chdir", str(spec.cwd), "--"]
    config = {
        "drop": [plan.drop_to, plan.drop_to] if plan.drop_to is not None else None,
        "rlimits": dict(plan.rlimits), "seed": [INSIDE_SEED, str(spec.writable_dir)], "relay": relay,
        "harvest_fd": plan.harvest_fd, "handback": list(plan.handback), "deadline_s": plan.deadline_s, "cwd": str(spec.cwd),
        "command": list(argv),
    }
    return cmd + [sys.executable, "-I", INSIDE_LAUNCHER, json.dumps(config)]
