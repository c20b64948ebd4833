"""What of the host system a jail shows: system folders read-only, fresh /proc, /dev and scratch
tmpfs, and the host's secrets and container runtimes blanked.

    cmd = system_mounts() + proc_and_dev(256 << 20)      # bubblewrap flags, in order
    tmpfs("/tmp", 256 << 20)                              # ["--perms", "1777", "--size", ..., "--tmpfs", "/tmp"]
    container_masks(env_path, views)                      # /dev/null over docker.sock, podman, ... where visible
    blank("/etc/shadow")                                  # ["--ro-bind", "/dev/null", "/etc/shadow"]

Files under ``/etc`` that others may not read are blanked; Python installs outside the system
folders (:func:`interpreter_prefixes`) are bound too, so ``python3`` works inside.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from veriscale.harness.jail.inside_paths import Views
from veriscale.harness.safe_fs import is_within

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


def interpreter_prefixes() -> list[str]:
    """Python installs outside the system folders (pyenv, venvs), so ``python3`` works inside."""
    prefixes = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)}
    system = [Path(p) for p in SYSTEM_PATHS]
    return sorted(p for p in prefixes if not any(is_within(Path(p), s) for s in system))


def blank(path: str, inside: str | None = None) -> list[str]:
    """Flags that cover ``path`` (at ``inside``) with an empty folder or an empty read-only file."""
    inside = path if inside is None else inside
    if os.path.isdir(path) and not os.path.islink(path):
        return ["--tmpfs", inside]
    return ["--ro-bind", "/dev/null", inside]


def container_masks(path_var: str, views: Views | None = None) -> list[str]:
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


def tmpfs(path: str, size: int, perms: str = "1777") -> list[str]:
    return ["--perms", perms, "--size", str(size), "--tmpfs", path]


def system_mounts() -> list[str]:
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


def proc_and_dev(tmpfs_bytes: int) -> list[str]:
    cmd = ["--proc", "/proc"]
    for path in PROC_READONLY:
        if os.path.isdir(path):
            cmd += ["--ro-bind", path, path]
    for path in PROC_BLANK:
        if os.path.exists(path):
            cmd += ["--ro-bind", "/dev/null", path]
    return cmd + ["--dev", "/dev", *tmpfs("/dev/shm", tmpfs_bytes)]


def hidden_visible(path: Path) -> bool:
    """A hidden path outside the session's folders needs covering only where it is visible at all."""
    return any(is_within(path, Path(root)) for root in (*SYSTEM_PATHS, *interpreter_prefixes()))

