"""The bubblewrap command line of a jail: namespaces, identity and the mount layout.

:func:`bwrap_command` turns a :class:`~veriscale.harness.jail.sandbox.JailSpec` and a command into
bubblewrap's arguments and the launcher's configuration (see :mod:`veriscale.harness.jail.sandbox`
for what the session sees). Neither goes on a command line: the caller writes the arguments to
a descriptor read by ``bwrap --args FD`` and the configuration to one the launcher reads::

    views = Views.for_spec(spec)              # host folder -> neutral path inside (/session/...)
    built = bwrap_command(spec, ["python3", "run.py"], Plan(relay_fd=7, seccomp_fd=4, harvest_fd=5,
                          launcher_fd=8, relay_code_fd=9, config_fd=10, drop_to=1900000003,
                          rlimits={"CPU": 900}, deadline_s=120), env_path, views)
    built.args, built.config                  # NUL-joined for --args; JSON for the launcher
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from veriscale.harness.safe_fs import is_within
from veriscale.errors import UserError, setting
from veriscale.harness.jail import jail_inside, jail_relay
from veriscale.harness.jail.netjail import inside_port

if TYPE_CHECKING:
    from veriscale.harness.jail.spec import JailSpec

#: The id the session has inside a user namespace (non-root callers; mapped to the caller).
INSIDE_UID = 1000
INSIDE_GID = 1000
INSIDE_DIR = "/.veriscale"
INSIDE_LAUNCHER = f"{INSIDE_DIR}/inside.py"
INSIDE_RELAY_CODE = f"{INSIDE_DIR}/jail_relay.py"
#: Neutral places of the session's folders inside: no host path is a mount point in the jail.
INSIDE_ROOT = "/session"
INSIDE_OUT = f"{INSIDE_ROOT}/.out"
INSIDE_EXTRA = f"{INSIDE_ROOT}/.extra"
INSIDE_HOME = "/home/session"
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
    """``$HOME`` inside: a fixed, empty tmpfs (the host user's home path is not shown)."""
    return INSIDE_HOME


_NAME_CHAR = r"[\w.~+@%-]"


class Views:
    """Where the session's host folders appear inside: the task's parent folder is ``/session``
    (only the task and what else is mounted show there), so the task is ``/session/<its name>``;
    the output folder below the task (or at ``/session/.out``); each other read-only folder below
    one of those or at ``/session/.extra/<name>``. Translates paths and strings that name them,
    both ways.

    A path inside a string is recognised whole: ``/a/task/x`` is translated, ``/a/task2`` and
    ``/b/a/task`` are not.
    """

    def __init__(self, pairs: Sequence[tuple[Path, str]]) -> None:
        self.pairs = sorted(((Path(h), i) for h, i in pairs), key=lambda p: len(str(p[0])), reverse=True)
        self._to_inside = self._pattern([str(h) for h, _ in self.pairs])
        self._to_host = self._pattern(sorted({i for _, i in self.pairs}, key=len, reverse=True))

    @staticmethod
    def _pattern(roots: list[str]) -> re.Pattern[str] | None:
        roots = [r for r in roots if r != "/"]
        if not roots:
            return None
        alternatives = "|".join(re.escape(r) for r in roots)
        return re.compile(rf"(?<![\w.~+@%/-])({alternatives})(?!{_NAME_CHAR})")

    @classmethod
    def for_spec(cls, spec: "JailSpec") -> "Views":
        task = spec.task_dir
        pairs: list[tuple[Path, str]] = [(task, f"{INSIDE_ROOT}/{task.name}")]
        if task.parent != task and task.parent != Path("/"):
            pairs.append((task.parent, INSIDE_ROOT))
        views = cls(pairs)
        if views.inside_path(spec.writable_dir) is None:
            pairs.append((spec.writable_dir, INSIDE_OUT))
        views = cls(pairs)
        taken: set[str] = set()
        for path in sorted(spec.readonly_extra, key=lambda p: len(p.parts)):
            if views.inside_path(path) is not None:
                continue
            name = re.sub(r"[^\w.-]", "_", path.name) or "root"
            candidate, n = name, 1
            while candidate in taken:
                n += 1
                candidate = f"{name}-{n}"
            taken.add(candidate)
            pairs.append((path, f"{INSIDE_EXTRA}/{candidate}"))
            views = cls(pairs)
        return views

    def inside_path(self, path: Path) -> str | None:
        """Where the host ``path`` appears inside, or None when it is below none of the folders."""
        for host, inside in self.pairs:
            if is_within(path, host):
                rel = path.relative_to(host)
                return inside if rel == Path(".") else f"{inside}/{rel.as_posix()}"
        return None

    def host_path(self, inside: str) -> Path | None:
        """The host path behind the inside path ``inside``, or None when no folder holds it."""
        for host, root in sorted(self.pairs, key=lambda p: len(p[1]), reverse=True):
            if inside == root or inside.startswith(root + "/"):
                return host / inside[len(root):].lstrip("/")
        return None

    def to_inside(self, text: str) -> str:
        """``text`` with each host folder's path replaced by its place inside."""
        if self._to_inside is None:
            return text
        table = {str(h): i for h, i in self.pairs}
        return self._to_inside.sub(lambda m: table[m.group(1)], text)

    def to_host(self, text: str) -> str:
        """``text`` with each inside place replaced by its host folder's path (for output read back)."""
        if self._to_host is None:
            return text
        table: dict[str, str] = {}
        for host, inside in self.pairs:
            table.setdefault(inside, str(host))
        return self._to_host.sub(lambda m: table[m.group(1)], text)


def interpreter_prefixes() -> list[str]:
    """Python installs outside the system folders (pyenv, venvs), so ``python3`` works inside."""
    prefixes = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)}
    system = [Path(p) for p in SYSTEM_PATHS]
    return sorted(p for p in prefixes if not any(is_within(Path(p), s) for s in system))


def _blank(path: str, inside: str | None = None) -> list[str]:
    """Flags that cover ``path`` (at ``inside``) with an empty folder or an empty read-only file."""
    inside = path if inside is None else inside
    if os.path.isdir(path) and not os.path.islink(path):
        return ["--tmpfs", inside]
    return ["--ro-bind", "/dev/null", inside]


def _container_masks(path_var: str, views: "Views | None" = None) -> list[str]:
    """Mask container sockets and binaries where the session would find them.

    ``path_var`` is the session's PATH (inside names); a path below a session folder is masked at
    its place inside, any other only where it is visible at its own path (system folders, the
    Python prefix, the scratch tmpfs), so no mask makes a host path a mount point.
    """
    own = [Path(p) for p in (*SYSTEM_PATHS, *interpreter_prefixes(), *SCRATCH_DIRS, "/var/run")]
    masks: set[str] = set()

    def add(host: str) -> None:
        inside = views.inside_path(Path(host)) if views is not None else None
        if inside is not None:
            masks.add(inside)
        elif views is None or any(is_within(Path(host), root) for root in own):
            masks.add(host)

    for sock in CONTAINER_SOCKETS:
        if os.path.lexists(sock):
            add(os.path.realpath(sock))
    for folder in path_var.split(":"):
        host_folder = str(views.host_path(folder) or folder) if views is not None else folder
        for name in CONTAINER_BINARIES:
            candidate = os.path.join(host_folder, name)
            if folder and os.path.lexists(candidate):
                add(os.path.realpath(candidate))
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
    own uid out of e.g. a folder below a root-only one. ``host_of`` names the host folder behind an
    inside path (None: none), so a parent that a bound folder already holds is not made again.
    """

    def __init__(self, host_of: "Callable[[str], Path | None]" = lambda p: None) -> None:
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


def _hidden_visible(path: Path) -> bool:
    """A hidden path outside the session's folders needs covering only where it is visible at all."""
    return any(is_within(path, Path(root)) for root in (*SYSTEM_PATHS, *interpreter_prefixes()))


def bwrap_command(spec: "JailSpec", argv: Sequence[str], plan: Plan, env_path: str,
                  views: Views | None = None) -> Built:
    """bubblewrap's arguments (no program name) and the launcher's configuration for ``argv``.

    Host paths in ``argv`` and ``spec.cwd`` are translated to their places inside (:class:`Views`);
    ``env_path`` is the session's PATH, already translated.
    """
    views = views or Views.for_spec(spec)
    bwrap = bwrap_path()
    layout = _Layout(views.host_path)
    layout.cmd += [*namespace_flags(bwrap, plan.drop_to is not None), "--hostname", "jail"]
    layout.cmd += _system_mounts() + _proc_and_dev(plan.tmpfs_bytes)
    layout.mounted += [Path(p) for p in (*SYSTEM_PATHS, "/proc", "/dev")]
    for path in SCRATCH_DIRS:
        layout.add(_tmpfs(path, plan.tmpfs_bytes), path)
    layout.cmd += ["--symlink", "../run", "/var/run"]
    layout.add(_tmpfs(inside_home(), plan.tmpfs_bytes), inside_home())
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
            layout.add(_blank(str(path), inside), inside)
        elif _hidden_visible(path):
            layout.add(_blank(str(path), str(path)), str(path))
    for path in spec.readonly_extra:
        inside = views.inside_path(path)
        assert inside is not None  # every extra has a place (Views.for_spec)
        layout.add(["--ro-bind", str(path), inside], inside)
    out = views.inside_path(spec.writable_dir)
    assert out is not None
    layout.add(_tmpfs(out, plan.output_bytes, "0777"), out)
    layout.add(["--perms", "0444", "--ro-bind-data", str(plan.launcher_fd), INSIDE_LAUNCHER], INSIDE_LAUNCHER)
    layout.add(["--perms", "0444", "--ro-bind-data", str(plan.relay_code_fd), INSIDE_RELAY_CODE], INSIDE_RELAY_CODE)
    relay = None
    if plan.relay_fd is not None and spec.model_endpoint is not None:
        relay = [plan.relay_fd, inside_port(spec.model_endpoint), spec.limits.relay_connections]
    cwd = views.inside_path(Path(spec.cwd)) if spec.cwd is not None else out
    cmd = layout.cmd + _container_masks(env_path, views)
    cmd += ["--remount-ro", "/", "--remount-ro", "/dev", "--seccomp", str(plan.seccomp_fd),
            "--chdir", str(cwd)]
    config = {
        "drop": [plan.drop_to, plan.drop_to] if plan.drop_to is not None else None,
        "rlimits": dict(plan.rlimits), "seed": [plan.seed_fd, out], "relay": relay,
        "harvest_fd": plan.harvest_fd, "handback": list(plan.handback), "deadline_s": plan.deadline_s,
        "cwd": str(cwd), "command": [views.to_inside(a) for a in argv],
    }
    return Built(cmd, ["--", sys.executable, "-I", INSIDE_LAUNCHER, str(plan.config_fd)], json.dumps(config))
