"""Run a verification session's command in a jail that only sees its task.

The jail is bubblewrap (Debian package ``bubblewrap``) with new user, mount, pid, network,
IPC and UTS namespaces, every capability dropped (bounding set included), an unprivileged id
inside (even when the caller is root) and no further user namespaces. Inside it sees:

* the task folder, read-only (``spec/``, ``workspace/``, ``rollouts/``: evidence stays intact);
* ``writable_dir``, the session's output folder: the only persistent writable place;
* ``readonly_extra`` (skills, tools) and the system (``/usr``, ``/etc``, the Python prefix),
  read-only; ``/etc`` entries that other users could not read are blanked;
* fresh empty ``/tmp``, ``/var/tmp``, ``/run`` and ``$HOME``; nothing else of the host
  (the task's parent, the data root with answer keys and archived scores, other sessions);
* container runtime sockets and ``docker``/``podman``/``nerdctl``/``ctr`` binaries masked;
* loopback only, plus ``model_endpoint`` forwarded to a fixed local URL (``spec.model_url()``).

Usage::

    check_jail_available()                   # UserError when namespaces are unavailable
    spec = JailSpec(task_dir=Path("tasks/t1"), writable_dir=Path("tasks/t1/sessions/resolve"),
                    hidden=[Path("tasks/t1/sessions")], model_endpoint=("127.0.0.1", 8000))
    result = run_jailed(spec, ["agent", "--base-url", spec.model_url()], timeout_s=600)
    result.returncode, result.stdout, result.timed_out

``JailSpec(..., no_jail=True)`` runs the command unconfined; the caller must log
:data:`JAIL_OFF_MESSAGE` when it does.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from veriscale.errors import UserError
from veriscale.harness import jail_relay
from veriscale.harness.netjail import (
    INSIDE_SOCKET_PATH,
    Endpoint,
    ModelForward,
    check_endpoint,
    inside_model_url,
    inside_port,
)
from veriscale.harness.workspace import INPUTS_DIR, ROLLOUTS_DIR, SPEC_DIR

JAIL_OFF_MESSAGE = (
    "jail is off (--no-jail): the session runs with your full access to files, processes, "
    "container runtimes and the network, so it can read answer keys and archived scores"
)

#: The id the session runs as inside the jail (the caller's own id outside, without privileges).
INSIDE_UID = 1000
INSIDE_GID = 1000
#: Where the in-jail relay script is mounted.
INSIDE_RELAY_PATH = "/run/veriscale/relay.py"
#: Bound read-only when present; symlinks (merged-/usr systems) are recreated as symlinks.
SYSTEM_PATHS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: Folders replaced by fresh empty tmpfs inside.
SCRATCH_DIRS = ("/tmp", "/var/tmp", "/run")
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
#: Bound on the wait for a killed session's processes to release its output pipes.
KILL_GRACE_S = 5.0
_EVIDENCE_DIRS = (SPEC_DIR, INPUTS_DIR, ROLLOUTS_DIR)


@dataclass(frozen=True)
class JailSpec:
    """What a jailed session sees; paths are resolved to absolute ones on construction.

    ``hidden`` paths are covered with an empty folder (or empty file) inside; ``readonly_extra``
    and ``writable_dir`` are mounted after them, so they may re-expose a path under a hidden
    folder (e.g. hide ``<task>/sessions`` but write into ``<task>/sessions/<name>``).
    """

    task_dir: Path
    writable_dir: Path
    readonly_extra: Sequence[Path] = ()
    hidden: Sequence[Path] = ()
    model_endpoint: Endpoint | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    no_jail: bool = False

    def __post_init__(self) -> None:
        task_dir = Path(self.task_dir).resolve()
        if not task_dir.is_dir():
            raise UserError(
                f"task folder '{self.task_dir}' does not exist: materialise the task first"
            )
        writable = Path(self.writable_dir).resolve()
        _check_writable_dir(task_dir, writable)
        extra = tuple(Path(p).resolve() for p in self.readonly_extra)
        for original, path in zip(self.readonly_extra, extra):
            if not path.exists():
                raise UserError(
                    f"read-only path '{original}' does not exist: fix the path or drop it"
                )
        cwd = writable if self.cwd is None else Path(self.cwd).resolve()
        if not any(_is_within(cwd, root) for root in (task_dir, writable, *extra)):
            raise UserError(
                f"working folder '{self.cwd}' is not visible in the jail: pick one inside the "
                "task, the writable folder or a read-only extra"
            )
        for key, value in self.env.items():
            if not isinstance(key, str) or not isinstance(value, str) or not key or "=" in key:
                raise UserError(
                    f"jail environment entry {key!r}={value!r} is invalid: use str names and values"
                )
        object.__setattr__(self, "task_dir", task_dir)
        object.__setattr__(self, "writable_dir", writable)
        object.__setattr__(self, "readonly_extra", extra)
        object.__setattr__(self, "hidden", tuple(Path(p).resolve() for p in self.hidden))
        object.__setattr__(self, "cwd", cwd)
        object.__setattr__(self, "env", dict(self.env))
        if self.model_endpoint is not None:
            object.__setattr__(self, "model_endpoint", check_endpoint(self.model_endpoint))

    def model_url(self) -> str | None:
        """Base URL of the model endpoint as the session sees it (direct when the jail is off)."""
        if self.model_endpoint is None:
            return None
        if self.no_jail:
            host, port = self.model_endpoint
            return f"http://{f'[{host}]' if ':' in host else host}:{port}"
        return inside_model_url(self.model_endpoint)


@dataclass(frozen=True)
class JailResult:
    """How a session's command ended, with everything it printed."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float


def _is_within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _check_writable_dir(task_dir: Path, writable: Path) -> None:
    if _is_within(task_dir, writable):
        raise UserError(
            f"writable folder '{writable}' contains the task folder: give the session its own "
            "output folder, e.g. <task>/sessions/<name>"
        )
    for name in _EVIDENCE_DIRS:
        if _is_within(writable, task_dir / name):
            raise UserError(
                f"writable folder '{writable}' is inside the task's read-only '{name}/': "
                "use an output folder outside it, e.g. <task>/sessions/<name>"
            )


# --- availability -------------------------------------------------------------------------


_NAMESPACE_FLAGS = (
    "--unshare-all",  # pid, net, ipc, uts, cgroup
    "--unshare-user",
    "--uid", str(INSIDE_UID),
    "--gid", str(INSIDE_GID),
    "--cap-drop", "ALL",
    "--die-with-parent",
    "--new-session",
)


def _bwrap_path() -> str:
    path = shutil.which("bwrap")
    if path is None:
        raise UserError(
            "bubblewrap ('bwrap') is not installed, so sessions cannot be jailed: install it "
            "(Debian/Ubuntu: apt-get install bubblewrap) or run with --no-jail"
        )
    return path


@functools.cache
def _supports_disable_userns(bwrap: str) -> bool:
    """bubblewrap >= 0.8 can forbid nested user namespaces inside the jail."""
    help_text = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10)
    return "--disable-userns" in help_text.stdout + help_text.stderr


def _namespace_flags(bwrap: str) -> list[str]:
    flags = list(_NAMESPACE_FLAGS)
    if _supports_disable_userns(bwrap):
        flags.append("--disable-userns")
    return flags


_available = False


def check_jail_available() -> None:
    """Return when jailed sessions can run here; otherwise raise UserError saying how to fix it."""
    global _available
    if _available:
        return
    if not sys.platform.startswith("linux"):
        raise UserError(
            f"sessions can only be jailed on Linux, not {sys.platform}: run with --no-jail"
        )
    bwrap = _bwrap_path()
    probe = subprocess.run(
        [bwrap, *_namespace_flags(bwrap), "--ro-bind", "/", "/", "--proc", "/proc", "true"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["no error text"])[-1]
        raise UserError(
            f"bubblewrap cannot create the jail's namespaces here ({reason}): allow user "
            "namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu also "
            "kernel.apparmor_restrict_unprivileged_userns=0) or run with --no-jail"
        )
    _available = True


# --- the mount layout ---------------------------------------------------------------------


@functools.cache
def _unreadable_by_others(root: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Files and folders under ``root`` that a user other than owner/group could not read.

    The jailed process keeps the caller's id outside the namespace (root, in CI), so such
    entries (``/etc/shadow``, ``/etc/ssl/private``) would be readable through the bound ``/etc``.
    """
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
    return tuple(files), tuple(folders)


def _inside_home() -> str:
    home = os.path.realpath(os.path.expanduser("~"))
    return "/home/session" if home == "/" else home


def _interpreter_prefixes() -> list[str]:
    """Python installs outside the system folders (pyenv, venvs), so ``python3`` works inside."""
    prefixes = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)}
    system = [Path(p) for p in SYSTEM_PATHS]
    return sorted(p for p in prefixes if not any(_is_within(Path(p), s) for s in system))


def _inside_env(spec: JailSpec) -> dict[str, str]:
    interpreter_bin = os.path.dirname(os.path.realpath(sys.executable))
    env = {
        "PATH": f"{interpreter_bin}:/usr/local/bin:/usr/bin:/bin",
        "HOME": _inside_home(),
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "USER": "session",
    }
    if spec.model_endpoint is not None:
        env["VERISCALE_MODEL_URL"] = inside_model_url(spec.model_endpoint)
    env.update(spec.env)
    return env


def _blank(path: str) -> list[str]:
    """Flags that cover ``path`` inside with an empty folder or an empty read-only file."""
    if os.path.isdir(path):
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


def bwrap_command(spec: JailSpec, argv: Sequence[str], forward_socket: Path | None) -> list[str]:
    """The full bubblewrap command line that runs ``argv`` in the jail ``spec`` describes."""
    bwrap = _bwrap_path()
    cmd = [bwrap, *_namespace_flags(bwrap), "--hostname", "jail"]
    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            cmd += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            cmd += ["--ro-bind", path, path]
    secret_files, secret_folders = _unreadable_by_others("/etc")
    for path in secret_folders:
        cmd += ["--tmpfs", path]
    for path in secret_files:
        cmd += ["--ro-bind", "/dev/null", path]
    cmd += ["--proc", "/proc", "--dev", "/dev"]
    for path in SCRATCH_DIRS:
        cmd += ["--tmpfs", path]
    cmd += ["--symlink", "../run", "/var/run", "--tmpfs", _inside_home()]
    for prefix in _interpreter_prefixes():
        cmd += ["--ro-bind", prefix, prefix]
    cmd += ["--ro-bind", str(spec.task_dir), str(spec.task_dir)]
    for path in spec.hidden:
        if os.path.lexists(path):
            cmd += _blank(str(path))
    for path in spec.readonly_extra:
        cmd += ["--ro-bind", str(path), str(path)]
    cmd += ["--bind", str(spec.writable_dir), str(spec.writable_dir)]
    cmd += _container_masks(_inside_env(spec)["PATH"])
    if forward_socket is not None:
        cmd += ["--ro-bind", str(forward_socket), INSIDE_SOCKET_PATH]
        cmd += ["--ro-bind", jail_relay.__file__, INSIDE_RELAY_PATH]
    cmd += ["--chdir", str(spec.cwd), "--"]
    if forward_socket is not None and spec.model_endpoint is not None:
        port = str(inside_port(spec.model_endpoint))
        cmd += [sys.executable, "-I", INSIDE_RELAY_PATH, INSIDE_SOCKET_PATH, port, "--"]
    return cmd + list(argv)


# --- running ------------------------------------------------------------------------------


def _check_command(argv: Sequence[str], timeout_s: float) -> None:
    if isinstance(argv, (str, bytes)) or not argv or not all(isinstance(a, str) for a in argv):
        raise UserError(
            f"session command {argv!r} is not a non-empty list of strings: "
            "pass e.g. ['python3', 'run.py']"
        )
    if not timeout_s > 0:
        raise UserError(
            f"session timeout {timeout_s!r} is not positive: pass the seconds the session may run"
        )


def _run_process_group(
    cmd: Sequence[str], env: Mapping[str, str], cwd: Path, timeout_s: float
) -> JailResult:
    """Run ``cmd`` in its own process group; on timeout SIGKILL the whole group."""
    started = time.monotonic()
    proc = subprocess.Popen(
        list(cmd),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env),
        cwd=cwd,
        start_new_session=True,
    )
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        try:
            out, err = proc.communicate(timeout=KILL_GRACE_S)
        except subprocess.TimeoutExpired as still_open:  # a daemon escaped the group (jail off)
            out, err = still_open.output or b"", still_open.stderr or b""
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
            proc.wait()
    return JailResult(
        returncode=proc.returncode,
        stdout=out.decode("utf-8", "replace"),
        stderr=err.decode("utf-8", "replace"),
        timed_out=timed_out,
        duration_s=time.monotonic() - started,
    )


def run_jailed(spec: JailSpec, argv: Sequence[str], timeout_s: float) -> JailResult:
    """Run ``argv`` in the jail ``spec`` describes (unconfined when ``spec.no_jail``)."""
    _check_command(argv, timeout_s)
    spec.writable_dir.mkdir(parents=True, exist_ok=True)
    if spec.no_jail:
        env = {**os.environ, **spec.env}
        return _run_process_group(argv, env, spec.cwd or spec.writable_dir, timeout_s)
    check_jail_available()
    with _model_forward(spec.model_endpoint) as forward_socket:
        cmd = bwrap_command(spec, argv, forward_socket)
        return _run_process_group(cmd, _inside_env(spec), spec.writable_dir, timeout_s)


@contextlib.contextmanager
def _model_forward(endpoint: Endpoint | None) -> Iterator[Path | None]:
    if endpoint is None:
        yield None
        return
    with ModelForward(endpoint) as forward:
        yield forward.socket_path
