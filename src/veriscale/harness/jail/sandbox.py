"""Run a verification session's command in a jail that only sees its task.

The jail is bubblewrap (Debian package ``bubblewrap``) with new mount, pid, network, IPC and
UTS namespaces, every capability dropped (bounding set included), a seccomp filter
(:mod:`~veriscale.harness.jail.seccomp`) and limits (:mod:`~veriscale.harness.jail.limits`).
The session never holds a host privilege: a root caller's session runs as a host uid of its own
(``JAIL_UID_BASE`` + a free slot; bubblewrap mounts as root, then the first process inside drops
to that uid for good), any other caller's as that caller through a user namespace (uid 1000
inside, no further user namespaces). Inside it sees:

* the task folder, read-only at ``/session/<task name>`` (``spec/``, ``workspace/``, ``rollouts/``: evidence stays intact);
* ``writable_dir``, the session's output folder, as a size-capped tmpfs seeded with the host's
  copy; when the command ends it is streamed back and the host rebuilds its copy from regular
  files and folders only (:mod:`~veriscale.harness.jail.harvest`): nothing a session writes
  ever lands on the host directly;
* ``readonly_extra`` (skills, tools) and the system (``/usr``, ``/etc``, the Python prefix),
  read-only; ``/etc`` entries that other users could not read are blanked (checked per run);
  ``/proc/sys`` and ``/proc/sysrq-trigger`` are read-only;
* fresh size-capped ``/tmp``, ``/var/tmp``, ``/run``, ``/dev/shm`` and ``$HOME``; the rest of
  ``/`` and ``/dev`` read-only; nothing else of the host (the task's parent, the data root with
  answer keys and archived scores, other sessions);
* container runtime sockets and ``docker``/``podman``/``nerdctl``/``ctr`` binaries masked;
* loopback only, plus ``model_endpoint`` forwarded to a fixed local URL (``spec.model_url()``),
  at most ``limits.relay_connections`` connections at once; with ``model_policy`` each request
  is parsed and checked on the host (:mod:`~veriscale.harness.jail.relay_gate`) and only allowed
  model calls go out, ``model_headers`` added to those alone.

Usage::

    check_jail_available()                   # UserError when namespaces are unavailable
    spec = JailSpec(task_dir=Path("tasks/t1"), writable_dir=Path("tasks/t1/sessions/resolve"),
                    hidden=[Path("tasks/t1/sessions")], model_endpoint=("127.0.0.1", 8000))
    result = run_jailed(spec, ["agent", "--base-url", spec.model_url()], timeout_s=600)
    result.returncode, result.stdout, result.timed_out, result.limit, result.harvest

What ``/proc`` inside shows of the host (issue 30): bubblewrap gets its options through
``--args FD`` and the launcher its JSON configuration through a drained pipe, so ``/proc/1/cmdline``
is ``bwrap --args N -- <python> -I /.veriscale/inside.py M``; the launcher and relay are copies
(``--ro-bind-data``), the output folder is seeded from a tar stream, and the model relay reaches
the host through an inherited socket (a broker handing out connections by ``SCM_RIGHTS``), so
neither the veriscale source folder nor the relay socket is mounted. The session's folders appear
at neutral places (:class:`~veriscale.harness.jail.inside_paths.Views`): the task's parent is
``/session``, the task ``/session/<task name>``, other folders ``/session/.extra/<name>``,
``$HOME`` ``/home/session``; host paths in the command, its environment and working folder are
translated on the way in, and inside paths in its stdout/stderr back to host paths on the way out.
What stays visible, and why: in ``/proc/self/mountinfo`` each bind mount's 4th field (its source's
path within the host filesystem: the task folder, the read-only extras, the Python prefix) - the
kernel always shows it and only copying would hide it; the Python prefix at its own path (the
host interpreter runs inside) and so in every command line and in ``PATH``; the system folders
and the names of blanked ``/etc`` files; and host paths the caller itself writes into files.

``JailSpec(..., no_jail=True)`` runs the command unconfined; the caller must log
:data:`JAIL_OFF_MESSAGE` when it does.

Under a stop flag (:func:`veriscale.models.cancel.current_stop`, set when a ``harness run`` is
stopped) a set flag kills the command's process group and cgroup at once; ``run_jailed`` then
raises ``Stopped`` and hands nothing back, so the host copy of the output folder stays as it was.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from veriscale.errors import UserError, setting, worded
from veriscale.harness.jail.capture import BoundedCapture
from veriscale.harness.jail.harvest import HarvestReader, HarvestReport
from veriscale.harness.jail.limits import JailLimits, ResourceBox, UidSlot
from veriscale.harness.jail.inside_paths import Views
from veriscale.harness.jail.mounts import (
    INSIDE_GID,
    INSIDE_UID,
    Plan,
    bwrap_command,
    bwrap_path,
    code_files,
    inside_home,
    namespace_flags,
)
from veriscale.harness.jail.seccomp import compiled_filter, filter_fd
from veriscale.harness.jail.netjail import ModelForward, inside_model_url
from veriscale.harness.jail.spec import JailSpec
from veriscale.models.cancel import Stopped, current_stop, on_stop, stopped

__all__ = ["INSIDE_GID", "INSIDE_UID", "JAIL_OFF_MESSAGE", "JailLimits", "JailResult", "JailSpec",
           "check_jail_available", "run_jailed"]

JAIL_OFF_MESSAGE = worded(
    f"jail is off ({setting('no_jail')}): the session runs with your full access to files, processes, "
    "container runtimes and the network, so it can read answer keys and archived scores"
)
#: Bound on the wait for a killed session's processes to release its output pipes.
KILL_GRACE_S = 5.0
#: Time the host allows past the deadline for the jail to stop its session and hand back output;
#: the hand-back also gets :func:`handback_reserve_s` of the session's own time.
HARVEST_GRACE_S = 5.0
#: Most seconds of a session's time kept back for handing its output folder back.
HANDBACK_RESERVE_S = 10.0
#: How many left-out entries of a hand-back the session's stderr names.
LEFT_OUT_SHOWN = 5


@dataclass(frozen=True)
class JailResult:
    """How a session's command ended, with the head and tail of what it printed.

    ``limit`` names the limit that stopped it (``"time"``, ``"memory"``) or is None;
    ``harvest`` says what came back of the output folder (None with the jail off);
    ``host_uid`` is the host user the session ran as; ``limits_via`` what enforced the limits
    (``'cgroup v1'``, ``'cgroup v2'``, ``'rlimits'``; ``'none'`` with the jail off) and
    ``limits_line`` the sentence saying so for each limit. ``cpu_quota_via`` names what held the
    CPU quota (None: nothing did); ``cpu_usage_s`` and ``cpu_throttled`` are the session cgroup's
    own counters (CPU seconds used, periods held back by the quota), None where not counted.
    """

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float
    limit: str | None = None
    harvest: HarvestReport | None = None
    stdout_cut_bytes: int = 0
    stderr_cut_bytes: int = 0
    host_uid: int | None = None
    limits_via: str = "none"
    limits_line: str = ""
    cpu_quota_via: str | None = None
    cpu_usage_s: float | None = None
    cpu_throttled: int | None = None



def handback_reserve_s(timeout_s: float) -> float:
    """Seconds before ``timeout_s`` at which a jailed command is stopped so its hand-back fits."""
    return min(HANDBACK_RESERVE_S, timeout_s / 4)


# --- availability -------------------------------------------------------------------------

_available = False


def check_jail_available() -> None:
    """Return when jailed sessions can run here; otherwise raise UserError saying how to fix it."""
    global _available
    if _available:
        return
    if not sys.platform.startswith("linux"):
        raise UserError(
            f"sessions can only be jailed on Linux, not {sys.platform}: run with the jail off ({setting('no_jail')})"
        )
    bwrap = bwrap_path()
    compiled_filter()  # UserError when libseccomp is missing
    probe = subprocess.run(
        [bwrap, *namespace_flags(bwrap, os.geteuid() == 0), "--ro-bind", "/", "/", "--proc", "/proc", "true"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["no error text"])[-1]
        raise UserError(
            f"bubblewrap cannot create the jail's namespaces here ({reason}): allow user "
            "namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu also "
            f"kernel.apparmor_restrict_unprivileged_userns=0) or run with the jail off ({setting('no_jail')})"
        )
    _available = True


# --- running ------------------------------------------------------------------------------


def _inside_env(spec: JailSpec, views: Views | None = None) -> dict[str, str]:
    interpreter_bin = os.path.dirname(os.path.realpath(sys.executable))
    env = {
        "PATH": f"{interpreter_bin}:/usr/local/bin:/usr/bin:/bin",
        "HOME": inside_home(),
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "USER": "session",
    }
    if spec.model_endpoint is not None:
        env["VERISCALE_MODEL_URL"] = inside_model_url(spec.model_endpoint)
    env.update(spec.env)
    if views is not None:
        env = {key: views.to_inside(value) for key, value in env.items()}
    return env


def _feed(data: bytes) -> int:
    """The read end of a pipe that a thread fills with ``data`` and closes: once read, the bytes are
    gone (nothing in the jail can read them again through ``/proc/<pid>/fd``)."""
    read_end, write_end = os.pipe()

    def write() -> None:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(write_end, view):]
        except OSError:  # bubblewrap or the launcher ended before reading it all
            pass
        finally:
            os.close(write_end)

    threading.Thread(target=write, daemon=True).start()
    return read_end


def _seed_fd(folder: Path) -> int:
    """The read end of a pipe a thread fills with a tar of ``folder`` (the host's copy of the output
    folder: regular files and folders, as the hand-back left it); the launcher unpacks it inside."""
    read_end, write_end = os.pipe()

    def write() -> None:
        try:
            with os.fdopen(write_end, "wb") as pipe, tarfile.open(fileobj=pipe, mode="w|") as tar:
                for name in sorted(os.listdir(folder)):
                    tar.add(folder / name, arcname=name)  # links stay links (and are refused inside)
        except (OSError, tarfile.TarError):  # the jail ended before reading it all
            pass

    threading.Thread(target=write, daemon=True).start()
    return read_end


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


@dataclass
class _Ended:
    returncode: int
    stdout: BoundedCapture
    stderr: BoundedCapture
    killed_by_host: bool
    duration_s: float


def _run_process_group(cmd: Sequence[str], env: Mapping[str, str], cwd: Path, timeout_s: float,
                       cap_bytes: int, pass_fds: Sequence[int] = (), box: ResourceBox | None = None,
                       after_start: Sequence[int] = ()) -> _Ended:
    """Run ``cmd`` in its own process group; past ``timeout_s`` SIGKILL the group (and the cgroup)."""
    started = time.monotonic()
    proc = subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(env), cwd=cwd, start_new_session=True,
                            pass_fds=tuple(pass_fds))
    for fd in after_start:  # the child holds its own copies now
        os.close(fd)
    out = BoundedCapture(proc.stdout, cap_bytes)  # type: ignore[arg-type]
    err = BoundedCapture(proc.stderr, cap_bytes)  # type: ignore[arg-type]
    killed = False

    def kill() -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        if box is not None:
            box.kill_all()

    stop = current_stop()  # a stopped run (Ctrl-C, SIGTERM of `harness run`) kills the group at once
    undo = on_stop(stop, kill)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        killed = True
        kill()
        proc.wait()
    finally:
        undo()
    for capture, pipe in ((out, proc.stdout), (err, proc.stderr)):
        if not capture.join(KILL_GRACE_S) and pipe is not None:  # a daemon escaped the group (jail off)
            pipe.close()
    return _Ended(proc.returncode, out, err, killed, time.monotonic() - started)


def run_jailed(spec: JailSpec, argv: Sequence[str], timeout_s: float) -> JailResult:
    """Run ``argv`` in the jail ``spec`` describes (unconfined when ``spec.no_jail``)."""
    _check_command(argv, timeout_s)
    spec.writable_dir.mkdir(parents=True, exist_ok=True)
    cap = spec.limits.capture_bytes
    if spec.no_jail:
        env = {**os.environ, **spec.env}
        ended = _run_process_group(argv, env, spec.cwd or spec.writable_dir, timeout_s, cap)
        stopped(current_stop())
        return _result(ended, timed_out=ended.killed_by_host, host_uid=os.geteuid())
    check_jail_available()
    as_root = os.geteuid() == 0
    with contextlib.ExitStack() as stack:
        box = stack.enter_context(ResourceBox(spec.limits))
        drop_to = stack.enter_context(UidSlot()).uid if as_root else None
        forward = stack.enter_context(_model_forward(spec))
        views = Views.for_spec(spec)
        seccomp = filter_fd()
        harvest_r, harvest_w = os.pipe()
        reader = HarvestReader(harvest_r, spec.limits.output_bytes)
        rlimits = {"CPU": spec.limits.cpu_s, "FSIZE": spec.limits.output_bytes, "CORE": 0,
                   "NPROC": spec.limits.pids}
        if box.kind == "rlimits":
            rlimits["AS"] = spec.limits.memory_bytes
        inside_deadline = timeout_s - handback_reserve_s(timeout_s)
        launcher_path, relay_path = code_files()
        launcher_fd = _feed(Path(launcher_path).read_bytes())
        relay_code_fd = _feed(Path(relay_path).read_bytes())
        seed_fd = _seed_fd(spec.writable_dir)
        config_fd = os.open(os.devnull, os.O_RDONLY)  # its number goes into the arguments; replaced below
        relay_fd = forward.broker_fd() if forward is not None else None
        plan = Plan(seccomp_fd=seccomp, harvest_fd=harvest_w, deadline_s=inside_deadline, drop_to=drop_to,
                    rlimits=rlimits, relay_fd=relay_fd, tmpfs_bytes=spec.limits.tmpfs_bytes,
                    output_bytes=spec.limits.output_bytes, handback=(reader.max_entries, reader.max_depth),
                    launcher_fd=launcher_fd, relay_code_fd=relay_code_fd, config_fd=config_fd, seed_fd=seed_fd)
        env = _inside_env(spec, views)
        built = bwrap_command(spec, argv, plan, env["PATH"], views)
        fed = _feed(built.config.encode())  # the launcher reads it (a drained pipe) and closes it
        os.dup2(fed, config_fd)
        os.close(fed)
        args_fd = _feed(built.args_bytes())
        cmd = [bwrap_path(), "--args", str(args_fd), *built.command]
        if box.enter_files:  # join the session's cgroup before bubblewrap starts anything
            join = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
            cmd = ["/bin/sh", "-c", join, "sh", *box.enter_files, "--", *cmd]
        fds = (seccomp, harvest_w, launcher_fd, relay_code_fd, config_fd, seed_fd, args_fd,
               *((relay_fd,) if relay_fd is not None else ()))
        started = time.monotonic()
        ended = _run_process_group(cmd, env, Path("/"), timeout_s + HARVEST_GRACE_S, cap,
                                   pass_fds=fds, box=box, after_start=fds)
        if (stop := current_stop()) is not None and stop.is_set():  # killed by a stopped run: nothing is handed back
            reader.discard()
            raise Stopped()
        harvest = reader.apply(spec.writable_dir, deadline=started + timeout_s + HARVEST_GRACE_S)
        memory = box.memory_killed()
        cpu = box.cpu_usage()
        timed_out = ended.killed_by_host or (ended.returncode == 124 and ended.duration_s >= inside_deadline - 0.5)
        limit = "memory" if memory else ("time" if timed_out else None)
        result = _result(ended, timed_out=timed_out, limit=limit, harvest=harvest, views=views,
                         host_uid=drop_to if as_root else os.geteuid(), limits_via=box.kind,
                         limits_line=box.describe())
        return dataclasses.replace(result, cpu_quota_via=box.cpu_via, cpu_usage_s=cpu.seconds if cpu else None,
                                   cpu_throttled=cpu.throttled if cpu else None)
    raise AssertionError("unreachable")  # pragma: no cover


def _result(ended: _Ended, *, timed_out: bool, limit: str | None = None, harvest: HarvestReport | None = None,
            host_uid: int | None = None, limits_via: str = "none", limits_line: str = "",
            views: Views | None = None) -> JailResult:
    back = views.to_host if views is not None else (lambda text: text)
    stdout, stderr = back(ended.stdout.text()), back(ended.stderr.text())
    if harvest is not None and not harvest.ok:
        stderr += f"\n[jail: output folder not kept: {harvest.error}]"
    elif harvest is not None and harvest.left_out:
        more = len(harvest.left_out) - LEFT_OUT_SHOWN
        stderr += (f"\n[jail: {len(harvest.left_out)} entr{'y' if len(harvest.left_out) == 1 else 'ies'} of the "
                   f"output folder not handed back: {'; '.join(harvest.left_out[:LEFT_OUT_SHOWN])}"
                   + (f"; and {more} more]" if more > 0 else "]"))
    return JailResult(returncode=ended.returncode, stdout=stdout, stderr=stderr,
                      timed_out=timed_out, duration_s=ended.duration_s, limit=limit, harvest=harvest,
                      stdout_cut_bytes=ended.stdout.cut_bytes, stderr_cut_bytes=ended.stderr.cut_bytes,
                      host_uid=host_uid, limits_via=limits_via, limits_line=limits_line)


@contextlib.contextmanager
def _model_forward(spec: JailSpec) -> Iterator[ModelForward | None]:
    if spec.model_endpoint is None:
        yield None
        return
    with ModelForward(spec.model_endpoint, headers=spec.model_headers, tap_factory=spec.model_tap,
                      max_connections=spec.limits.relay_connections, policy=spec.model_policy) as forward:
        yield forward
