"""The jail's first process: drop to the session's identity, set limits, run the command, hand back.

Standard library only: bubblewrap runs it with the host's interpreter (``python3 -I``) and
veriscale is not importable inside; it is a copy (``--ro-bind-data``), not a bind of the host's
file. Its one argument is the descriptor it reads its JSON configuration from (so the
configuration is on no command line the session can read in ``/proc``)::

    python3 -I /.veriscale/inside.py 9    # fd 9 holds:
        {"drop": [1900000004, 1900000004], "rlimits": {...},
         "seed": [8, "/session/task/sessions/s1"], "relay": [7, 8000, 16],
         "harvest_fd": 5, "handback": [20000, 64], "deadline_s": 120, "cwd": "/session/task/sessions/s1",
         "command": ["sh", "-c", "..."]}

and in order: drops every capability and switches to ``drop`` (host root callers only), sets
the rlimits, unpacks the host's copy of the output folder (``seed`` = [descriptor of a tar
stream the host writes, the folder]) into the session's size-capped tmpfs, starts the model relay (``relay`` = [broker fd, port, most
connections]: each client gets a fresh connection from the host's broker), runs ``command`` until it ends or
``deadline_s`` passes, kills every other process of the session, then writes the output folder
as a tar stream to ``harvest_fd`` (regular files and folders; at most ``handback`` = [entries,
depth]). The host trusts none of this: it extracts the stream with its own checks and caps.
Exit code: the command's (``128 + N`` when signal N ended it, 124 on the deadline).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import stat
import subprocess
import sys
import tarfile
import threading

PR_CAPBSET_DROP = 24
CAPABILITY_VERSION_3 = 0x20080522
DEADLINE_EXIT = 124
RLIMITS = {"NPROC": resource.RLIMIT_NPROC, "CPU": resource.RLIMIT_CPU, "FSIZE": resource.RLIMIT_FSIZE,
           "CORE": resource.RLIMIT_CORE, "AS": resource.RLIMIT_AS}


def drop_identity(uid: int, gid: int) -> None:
    """Empty the capability bounding set, then become ``uid``/``gid`` with no groups (no way back)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise SystemExit("jail: could not switch to the session's user id")
    clear_capabilities(libc)


def clear_capabilities(libc: ctypes.CDLL) -> None:
    """capset(2) with every set empty (the uid switch already emptied permitted and effective)."""
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    if libc.capset(header, data) != 0:
        raise SystemExit("jail: could not clear the inheritable capabilities")


def set_rlimits(limits: dict) -> None:
    for name, value in limits.items():
        resource.setrlimit(RLIMITS[name], (value, value))


def seed(source_fd: int, dest: str) -> None:
    """Unpack the host's copy of the output folder (a tar stream on ``source_fd``) into the (empty)
    session tmpfs; a stream cut short leaves what arrived (the host copy is never bound inside)."""
    options = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    try:
        with os.fdopen(source_fd, "rb") as pipe, tarfile.open(fileobj=pipe, mode="r|") as tar:
            tar.extractall(dest, **options)
    except (OSError, tarfile.TarError) as exc:
        print(f"jail: the output folder was not fully seeded ({exc})", file=sys.stderr)


def broker_connect(broker, lock):
    """A fresh connection to the host's model forward: one byte out, one descriptor back."""
    import socket

    with lock:
        broker.sendall(b"c")
        _, fds, _, _ = socket.recv_fds(broker, 1, 1)
    if not fds:
        raise OSError("jail: the host's model forward is gone")
    return socket.socket(fileno=fds[0])


def start_relay(broker_fd: int, port: int, max_connections: int) -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import socket

    from jail_relay import serve_forever  # noqa: E402 - beside this file inside

    broker = socket.socket(fileno=broker_fd)
    os.set_inheritable(broker_fd, False)
    lock = threading.Lock()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    threading.Thread(target=serve_forever, args=(listener, lambda: broker_connect(broker, lock)),
                     kwargs={"max_connections": max_connections}, daemon=True).start()


def run(command: list, cwd: str, deadline_s: float) -> int:
    try:
        child = subprocess.Popen(command, cwd=cwd)
    except OSError as exc:
        print(f"jail: cannot run {command[0]!r}: {exc.strerror}", file=sys.stderr)
        return 127
    try:
        code = child.wait(timeout=deadline_s)
    except subprocess.TimeoutExpired:
        code = None
    kill_everyone_else()
    if code is None:
        child.wait()
        return DEADLINE_EXIT
    return 128 - code if code < 0 else code


def kill_everyone_else() -> None:
    """SIGKILL every process of the session but this one, so nothing writes during the harvest."""
    try:
        os.kill(-1, signal.SIGKILL)  # all processes this one may signal, except itself and init
    except ProcessLookupError:
        pass
    while True:  # reap, so the kernel has finished with them
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break


def harvest(folder: str, fd: int, max_entries: int = 20_000, max_depth: int = 64) -> None:
    """Stream ``folder`` as an uncompressed tar to ``fd``: folders, regular files, and (as markers the
    host reports and drops) hard links, symbolic links and FIFOs.

    The walk is iterative and descriptor-relative (any depth, any path length); folders deeper
    than ``max_depth`` are sent without what they hold, and the stream stops after
    ``max_entries`` + 1 entries (the host refuses such a folder as a whole).
    """
    with os.fdopen(fd, "wb") as pipe, tarfile.open(fileobj=pipe, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        root = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        stack = [(root, "", iter(sorted(os.listdir(root))))]
        first_name = {}  # (dev, ino) -> the first name of a file with several
        count = 0
        try:
            while stack:
                dir_fd, rel, names = stack[-1]
                name = next(names, None)
                if name is None:
                    os.close(dir_fd)
                    stack.pop()
                    continue
                count += 1
                if count > max_entries + 1:  # one past the cap tells the host to refuse the folder
                    print(f"jail: the output folder holds more than {max_entries} entries; not handed back",
                          file=sys.stderr)
                    return
                path = f"{rel}/{name}" if rel else name
                info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                member = tarfile.TarInfo(path)
                member.mtime = int(info.st_mtime)
                member.mode = stat.S_IMODE(info.st_mode) & 0o777
                if stat.S_ISDIR(info.st_mode):
                    member.type = tarfile.DIRTYPE
                    tar.addfile(member)
                    if path.count("/") + 1 <= max_depth:
                        try:
                            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
                        except OSError as exc:  # e.g. a folder the session made unreadable
                            print(f"jail: {path!r} not handed back ({exc.strerror})", file=sys.stderr)
                            continue
                        stack.append((child, path, iter(sorted(os.listdir(child)))))
                elif stat.S_ISREG(info.st_mode):
                    key = (info.st_dev, info.st_ino)
                    if info.st_nlink > 1 and key in first_name:
                        member.type, member.linkname = tarfile.LNKTYPE, first_name[key]
                        tar.addfile(member)
                        continue
                    if info.st_nlink > 1:
                        first_name[key] = path
                    try:
                        file_fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
                    except OSError as exc:  # e.g. a file the session made unreadable: that file only
                        print(f"jail: {path!r} not handed back ({exc.strerror})", file=sys.stderr)
                        continue
                    with os.fdopen(file_fd, "rb") as handle:
                        member.size = os.fstat(file_fd).st_size
                        tar.addfile(member, handle)
                elif stat.S_ISLNK(info.st_mode) or stat.S_ISFIFO(info.st_mode):
                    member.type = tarfile.SYMTYPE if stat.S_ISLNK(info.st_mode) else tarfile.FIFOTYPE
                    tar.addfile(member)
        finally:
            for dir_fd, _, _ in stack:
                os.close(dir_fd)


def read_config(arg: str) -> dict:
    """The configuration: JSON text read from descriptor ``arg`` (then closed)."""
    fd = int(arg)
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return json.loads(b"".join(chunks))


def main(argv: list) -> int:
    config = read_config(argv[0])
    if config.get("drop"):
        drop_identity(*config["drop"])
    set_rlimits(config.get("rlimits", {}))
    os.umask(0o022)
    if config.get("seed"):
        seed(int(config["seed"][0]), config["seed"][1])
    if config.get("relay"):
        start_relay(int(config["relay"][0]), int(config["relay"][1]), int(config["relay"][2]))
    code = run(config["command"], config["cwd"], float(config["deadline_s"]))
    if config.get("harvest_fd") is not None and config.get("seed"):
        try:
            harvest(config["seed"][1], int(config["harvest_fd"]), *config.get("handback", ()))
        except OSError as exc:
            print(f"jail: output folder not handed back ({exc})", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
