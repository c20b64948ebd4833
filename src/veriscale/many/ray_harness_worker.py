"""What a Ray worker runs for one task of ``harness run --executor ray``, and the per-node preflight.

    for kind, data in run_task_here(payload):      # a Ray streaming generator's body
        ("node", {"ip": ..., "pid": ...})            # first: where the task runs (named if the worker is lost)
        ("log", line)                                # a progress line of the protocol
        ("calls", {"calls": [...], "links": [...]})  # call rows and the task run's links, as they land
        ("done", {"outcome", "raised", "run_tar", "left_out", "task_dir", "run_dir"})
        ("crash", text)                              # the task could not be set up here (not retried)

The worker unpacks the task folder (and the run folder so far, for a resume) into a scratch folder
whose path depends only on the driver's run folder, so a retried task sends the same prompts and the
calls the driver committed (``seeds``, put in the scratch store first) are cache hits. It runs
:func:`veriscale.harness.protocol.task_protocol.run_protocol` there, the way ``run_tasks`` does for
one task, over a scratch store whose new calls a feed (:class:`veriscale.many.call_feed.CallFeed`)
streams back every half second; then it packs its whole run folder, removes the scratch folder and
returns the packed run folder. Nothing stays on the worker.
"""

from __future__ import annotations

import fcntl
import os
import queue
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from veriscale.harness.protocol.task_protocol import ProtocolConfig

FEED_EVERY_S = 0.5


@dataclass
class HarnessPayload:
    """One attempt at one task (pickled to the worker by Ray)."""

    task_name: str
    task_tar: bytes
    run_id: str
    config: ProtocolConfig
    agent: str = "builtin"
    run_tar: bytes | None = None  # the driver's run folder so far (a resumed run), None: none yet
    runs_root: bool = False  # the driver keeps runs in a runs folder (<root>/<task>/<run id>)
    skills: list[bytes] = field(default_factory=list)  # the user's skill folders, packed
    seeds: list[dict[str, Any]] = field(default_factory=list)
    chosen: dict[str, Any] = field(default_factory=dict)  # the command's settings library code reads
    concurrency: int = 2  # sessions of this task at once
    scratch_key: str = "task"  # the scratch folder's name: the same for every attempt at this task
    max_bytes: int = 4 << 30
    setup: Callable[[], None] | None = None  # run first on the worker (a test registers its double here)


def _node() -> dict[str, Any]:
    try:
        import ray

        ip = ray.util.get_node_ip_address()
    except Exception:  # noqa: BLE001 - outside Ray
        ip = "this host"
    return {"ip": ip, "pid": os.getpid()}


def run_task_here(payload: HarnessPayload) -> Iterator[tuple[str, Any]]:
    """Run ``payload``'s task here, yielding what the driver needs (module docstring)."""
    from veriscale.models.cancel import StopFlag

    out: queue.Queue[tuple[str, Any]] = queue.Queue()
    stop = StopFlag()
    worker = threading.Thread(target=_work, args=(payload, out, stop), name="veriscale-harness-task", daemon=True)
    yield "node", _node()
    worker.start()
    finished = False
    try:
        while True:
            kind, data = out.get()
            yield kind, data
            if kind in ("done", "crash"):
                finished = True
                return
    finally:
        if not finished:  # cancelled by the driver: the protocol stops at its next wait
            stop.set()
            worker.join(30)


def _work(payload: HarnessPayload, out: queue.Queue[tuple[str, Any]], stop: Any) -> None:
    try:
        out.put(("done", _run(payload, out, stop)))
    except BaseException as exc:  # noqa: BLE001 - reported to the driver, which retries the task
        out.put(("crash", f"{type(exc).__name__}: {exc}"))


def _run(payload: HarnessPayload, out: queue.Queue[tuple[str, Any]], stop: Any) -> dict[str, Any]:
    from veriscale import settings as setting_source

    if payload.setup is not None:
        payload.setup()
    setting_source.choose(payload.chosen)
    with claimed_scratch(Path(tempfile.gettempdir()) / "veriscale-harness", payload.scratch_key) as scratch:
        return _run_task_in(scratch, payload, out, stop)


def _run_task_in(scratch: Path, payload: HarnessPayload, out: queue.Queue[tuple[str, Any]], stop: Any) -> dict[str, Any]:
    from veriscale.engine.run_scope import recorded_run
    from veriscale.engine.store import Store
    from veriscale.harness.protocol.layout import RunLayout
    from veriscale.harness.protocol.task_protocol import run_protocol
    from veriscale.harness.sessions.executors import make_executor
    from veriscale.many.call_feed import CallFeed, put_rows
    from veriscale.many.ray_worker import travelling
    from veriscale.many.run_folder_transfer import pack_folder, unpack_folder
    from veriscale.models.cancel import stopping_with

    task_dir = scratch / "tasks" / payload.task_name
    unpack_folder(payload.task_tar, task_dir, max_bytes=payload.max_bytes, what="the task folder")
    layout = RunLayout.for_task(task_dir, payload.run_id, scratch / "runs" if payload.runs_root else None)
    if payload.run_tar is not None:
        unpack_folder(payload.run_tar, layout.root, max_bytes=payload.max_bytes, what="the run folder")
    skills = []
    for i, packed in enumerate(payload.skills):
        skills.append(scratch / "skills" / str(i))
        unpack_folder(packed, skills[-1], max_bytes=payload.max_bytes, what="a skills folder")
    config = replace(payload.config, skills_dirs=skills)
    store = Store.open(scratch / "calls.sqlite3")
    outcome, raised = None, None
    try:
        put_rows(store, payload.seeds)
        backend = None
        if payload.agent == "builtin":
            from veriscale.models.uri import load_backend

            backend = load_backend(config.model_uri)
        executor = make_executor(payload.agent, backend, store)
        with recorded_run(store, "harness task", config.model_uri, {"task": str(task_dir),
                                                                   "run_id": payload.run_id}) as run:
            feed = CallFeed(store, run.id)
            done = threading.Event()

            def stream() -> None:
                while not done.wait(FEED_EVERY_S):
                    data = feed.new()
                    if data["calls"] or data["links"]:
                        out.put(("calls", data))

            streamer = threading.Thread(target=stream, name="veriscale-harness-feed", daemon=True)
            streamer.start()
            try:
                with stopping_with(stop):
                    outcome = run_protocol(task_dir, layout, config, executor,
                                           log=lambda line: out.put(("log", line)),
                                           slots=threading.BoundedSemaphore(payload.concurrency),
                                           store_run_id=run.id)
            except Exception as exc:  # noqa: BLE001 - the task's own error: the driver raises it again
                raised = travelling(exc)
            finally:
                done.set()
                streamer.join()
                out.put(("calls", feed.new()))
            run.finish("ok" if raised is None else "failed", {})
    finally:
        store.close()
    run_tar, left_out = (pack_folder(layout.root, max_bytes=payload.max_bytes, what="the run folder")
                         if layout.root.is_dir() else (None, []))
    return {"outcome": outcome, "raised": raised, "run_tar": run_tar, "left_out": left_out,
            "task_dir": str(task_dir), "run_dir": str(layout.root)}


@contextmanager
def claimed_scratch(root: Path, key: str) -> Iterator[Path]:
    """The scratch folder ``root/key`` for one task, held under an exclusive lock on ``root/key.lock``
    while the task runs; the folder and its lock file are removed after it. First every other scratch
    folder under ``root`` whose lock nobody holds is removed, with its lock file: a worker killed
    mid-task (out of memory, its retries spent) leaves its folder behind, and the next task on the node
    clears it, so nothing stays only on a worker::

        with claimed_scratch(Path("/tmp/veriscale-harness"), "a1b2c3") as scratch: ...
    """
    from veriscale.harness.safe_write import make_plain_dir, remove_tree

    make_plain_dir(root)
    lock = root / f"{key}.lock"
    fd = lock_file(lock)  # another attempt at this task still running here: wait for it
    try:
        _sweep(root, keep=key)
        scratch = root / key
        remove_tree(scratch)  # what a worker killed at this task left
        make_plain_dir(scratch)
        try:
            yield scratch
        finally:
            remove_tree(scratch)
    finally:
        release_lock_file(lock, fd)


def lock_file(path: Path, *, wait: bool = True) -> int | None:
    """An exclusive ``flock`` on ``path`` (made if missing): its descriptor, or None when ``wait`` is
    False and another holds it. A lock file is removed by its holder on release (:func:`release_lock_file`),
    so a lock taken on a file that was removed meanwhile is dropped and taken again on the file now at
    ``path``: two holders never both think they own it."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        try:
            if os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)  # its holder removed it as we waited: lock the one there now


def release_lock_file(path: Path, fd: int) -> None:
    """Remove the lock file ``fd`` holds, then let the lock go (a waiter on it then sees it removed)."""
    try:
        path.unlink(missing_ok=True)
    finally:
        os.close(fd)


def _sweep(root: Path, keep: str) -> None:
    from veriscale.harness.safe_write import remove_tree

    for entry in root.iterdir():
        if entry.name in (keep, f"{keep}.lock") or entry.is_symlink():
            continue
        name = entry.name.removesuffix(".lock") if entry.name.endswith(".lock") else entry.name
        if entry.name.endswith(".lock") and (root / name).exists():
            continue  # swept with its folder
        if not entry.name.endswith(".lock") and not entry.is_dir():
            continue
        lock = root / f"{name}.lock"
        try:
            fd = lock_file(lock, wait=False)
        except OSError:
            continue
        if fd is None:  # a live task's folder
            continue
        try:
            remove_tree(root / name)
        finally:
            release_lock_file(lock, fd)


# --- preflight --------------------------------------------------------------------------------


def node_check(agent: str, no_jail: bool, model_uri: str, setup: Callable[[], None] | None = None) -> dict[str, Any]:
    """What this node lacks for a harness task: ``{"ip", "missing": [sentence, ...]}`` (templates, with
    setting references). Jail (unless off), the agent's CLI (pi: the package and Node.js), and a TCP
    connection to an HTTP model endpoint."""
    from veriscale.errors import UserError

    if setup is not None:
        setup()
    missing: list[str] = []
    if not no_jail:
        from veriscale.harness.jail.sandbox import check_jail_available

        try:
            check_jail_available()
        except UserError as exc:
            missing.append(f"the jail ({exc.template})")
    if agent == "pi":
        from veriscale.harness.sessions.executors import check_node, find_pi

        for check in (find_pi, check_node):
            try:
                check()
            except UserError as exc:
                missing.append(f"the pi agent ({exc.template})")
    if model_uri.startswith(("http://", "https://")):
        import socket
        from urllib.parse import urlsplit

        parts = urlsplit(model_uri)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            socket.create_connection((parts.hostname or "", port), timeout=5).close()
        except OSError as exc:
            missing.append(f"the model endpoint ({parts.hostname}:{port} does not answer from there: "
                           f"{exc.strerror or exc}; start the server or make it reachable from this node)")
    return {**_node(), "missing": missing}
