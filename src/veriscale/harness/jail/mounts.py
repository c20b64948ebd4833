"""The bubblewrap command line of a jail: namespaces, identity and the mount layout.

:func:`bwrap_command` turns a :class:`~veriscale.harness.jail.sandbox.JailSpec` and a command into
bubblewrap's arguments and the launcher's configuration (see :mod:`veriscale.harness.jail.sandbox`
for what the session sees). Neither goes on a command line: the caller writes the arguments to
a descriptor read by ``bwrap --args FD`` and the configuration to one the launcher reads::

    views = Views.for_spec(spec)              # inside_paths.py: host folder -> neutral path inside (/session/...)
    built = bwrap_command(spec, ["python3", "run.py"], Plan(relay_fd=7, seccomp_fd=4, harvest_fd=5,
                          launcher_fd=8, relay_code_fd=9, config_fd=10, drop_to=1900000003,
                          rlimits={"CPU": 900}, deadline_s=120), env_path, views)
    built.args, built.config                  # NUL-joined for --args; JSON for the launcher
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from veriscale.errors import UserError, setting
from veriscale.harness.jail import jail_inside, jail_relay
from veriscale.harness.jail.host_mounts import (
    SCRATCH_DIRS,
    SYSTEM_PATHS,
    blank,
    container_masks,
    hidden_visible,
    interpreter_prefixes,
    proc_and_dev,
    system_mounts,
    tmpfs,
)
from veriscale.harness.jail.inside_paths import Views
from veriscale.harness.jail.netjail import inside_port
from veriscale.harness.safe_fs import is_within

if TYPE_CHECKING:
    from veriscale.harness.jail.spec import JailSpec

#: The id the session has inside a user namespace (non-root callers; mapped to the caller).
INSIDE_UID = 1000
INSIDE_GID = 1000
INSIDE_DIR = "/.veriscale"
INSIDE_LAUNCHER = f"{INSIDE_DIR}/inside.py"
INSIDE_RELAY_CODE = f"{INSIDE_DIR}/jail_relay.py"
INSIDE_HOME = "/home/session"


@dataclass(frozen=True)
class Plan:
    """What one run adds to the spec: descriptors, identity, limits, deadline."""

    seccomp_fd: int
    harvest_fd: int
    deadline_s: float
    launcher_fd: int = -1                 # jail_inside.py, copied into the jail (--ro-bind-data)
    relay_code_fd: int = -1               # jail_relay.py, likewise
    config_fd: int = -1                   # the launcher reads its JSON configuration from here
    seed_fd: int = -1                     # a tar of the host's copy of the output folder
    drop_to: int | None = None            # host uid (root callers); None: user namespace
    rlimits: Mapping[str, int] = field(default_factory=dict)
    relay_fd: int | None = None           # the model forward's broker socket (netjail.ModelForward)
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


def inside_home() -> str:
    """``$HOME`` inside: a fixed, empty tmpfs (the host user's home path is not shown)."""
    return INSIDE_HOME


class _Layout:
    """Collects mounts in order, first making each mount point's missing parents world-traversable.

    bubblewrap makes missing parents 0700 when it runs as root, which would lock the session's
    own uid out of e.g. a folder below a root-only one. ``host_of`` names the host folder behind an
    inside path (None: none), so a parent that a bound folder already holds is not made again.
    """

    def __init__(self, host_of: Callable[[str], Path | None] = lambda p: None) -> None:
        self.cmd: list[str] = []
        self.mounted: list[Path] = []   # mount points inside, tmpfs roots included
        self.made: set[Path] = set()
        self.tmpfs: set[Path] = set()
        self.host_of = host_of

    def _covered(self, path: Path) -> bool:
        if path in self.made or path in self.mounted:
            return True
        host = self.host_of(str(path)) or path
        return any(is_within(path, m) and host.is_dir() for m in self.mounted if m not in self.tmpfs)

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
        if "--tmpfs" in flags or (flags and flags[0] == "--ro-bind" and flags[1] != dest and self.host_of(dest) is None) \
                or "--ro-bind-data" in flags:
            self.tmpfs.add(Path(dest))  # its contents are not the host's folder of that name


def code_files() -> tuple[str, str]:
    """The host files copied into the jail as its launcher and relay (never bound: a bind's source
    shows in the jail's ``/proc/self/mountinfo``)."""
    return jail_inside.__file__, jail_relay.__file__


@dataclass(frozen=True)
class Built:
    """bubblewrap's options (for ``--args FD``), the command line after them (``--``, the launcher and
    its descriptor: bubblewrap takes the command only from its own command line) and the launcher's
    configuration (JSON text)."""

    args: list[str]
    command: list[str]
    config: str

    def args_bytes(self) -> bytes:
        return b"".join(a.encode() + b"\0" for a in self.args)


def bwrap_command(spec: JailSpec, argv: Sequence[str], plan: Plan, env_path: str,
                  views: Views | None = None) -> Built:
    """bubblewrap's arguments (no program name) and the launcher's configuration for ``argv``.

    Host paths in ``argv`` and ``spec.cwd`` are translated to their places inside (:class:`Views`);
    ``env_path`` is the session's PATH, already translated.
    """
    views = views or Views.for_spec(spec)
    bwrap = bwrap_path()
    layout = _Layout(views.host_path)
    layout.cmd += [*namespace_flags(bwrap, plan.drop_to is not None), "--hostname", "jail"]
    layout.cmd += system_mounts() + proc_and_dev(plan.tmpfs_bytes)
    layout.mounted += [Path(p) for p in (*SYSTEM_PATHS, "/proc", "/dev")]
    for path in SCRATCH_DIRS:
        layout.add(tmpfs(path, plan.tmpfs_bytes), path)
    layout.cmd += ["--symlink", "../run", "/var/run"]
    layout.add(tmpfs(inside_home(), plan.tmpfs_bytes), inside_home())
    for prefix in interpreter_prefixes():
        layout.add(["--ro-bind", prefix, prefix], prefix)
    task = views.inside_path(spec.task_dir)
    assert task is not None
    layout.add(["--ro-bind", str(spec.task_dir), task], task)
    for path in spec.hidden:
        if not os.path.lexists(path):
            continue
        inside = views.inside_path(path)
        if inside is not None:
            layout.add(blank(str(path), inside), inside)
        elif hidden_visible(path):
            layout.add(blank(str(path), str(path)), str(path))
    for path in spec.readonly_extra:
        inside = views.inside_path(path)
        assert inside is not None  # every extra has a place (Views.for_spec)
        layout.add(["--ro-bind", str(path), inside], inside)
    out = views.inside_path(spec.writable_dir)
    assert out is not None
    layout.add(tmpfs(out, plan.output_bytes, "0777"), out)
    layout.add(["--perms", "0444", "--ro-bind-data", str(plan.launcher_fd), INSIDE_LAUNCHER], INSIDE_LAUNCHER)
    layout.add(["--perms", "0444", "--ro-bind-data", str(plan.relay_code_fd), INSIDE_RELAY_CODE], INSIDE_RELAY_CODE)
    relay = None
    if plan.relay_fd is not None and spec.model_endpoint is not None:
        relay = [plan.relay_fd, inside_port(spec.model_endpoint), spec.limits.relay_connections]
    cwd = views.inside_path(Path(spec.cwd)) if spec.cwd is not None else out
    cmd = layout.cmd + container_masks(env_path, views)
    cmd += ["--remount-ro", "/", "--remount-ro", "/dev", "--seccomp", str(plan.seccomp_fd),
            "--chdir", str(cwd)]
    config = {
        "drop": [plan.drop_to, plan.drop_to] if plan.drop_to is not None else None,
        "rlimits": dict(plan.rlimits), "seed": [plan.seed_fd, out], "relay": relay,
        "harvest_fd": plan.harvest_fd, "handback": list(plan.handback), "deadline_s": plan.deadline_s,
        "cwd": str(cwd), "command": [views.to_inside(a) for a in argv],
    }
    return Built(cmd, ["--", sys.executable, "-I", INSIDE_LAUNCHER, str(plan.config_fd)], json.dumps(config))
