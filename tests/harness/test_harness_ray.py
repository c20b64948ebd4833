"""``harness run --executor ray``: the same outcomes and run folders as a local run, the driver the store's
only writer, a per-node preflight that refuses before any work, a worker killed mid-task replaced
(its committed calls not asked again), run folders coming back through a transfer that trusts nothing,
and the ``--agent`` / ``--executor`` flags.

Workers load the scripted chat doubles through the runner's ``setup`` (tests/support/ray_harness_doubles.py).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.ray_harness_doubles import PerTaskChat, register_in_worker
from veriscale.cli import app
from veriscale.engine.store import Store
from veriscale.errors import UserError
from veriscale.harness.protocol.layout import RunLayout
from veriscale.harness.protocol.protocol_runner import RunOptions, run_tasks
from veriscale.many.run_folder_transfer import TransferRefused, pack_folder, unpack_folder

REPO = Path(__file__).resolve().parents[2]
#: files whose bytes do not depend on where or when the run ran
SAME_BYTES = ("claims/", "sessions/resolve/ledger.json", "sessions/challenge/ledger.json", "sessions/adjudicate/finish.json",
              "sessions/adjudicate/repair.json", "sessions/adjudicate/out/", "evidence/", "delivery/")


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}})  # workers import tests.support
    yield ray
    ray.shutdown()


@pytest.fixture(autouse=True)
def doubles_here():
    """The workers' test-double schemes known to the driver too, which checks a URI before any work."""
    from veriscale.models.registry import SCHEMES

    saved = dict(SCHEMES)
    register_in_worker()
    yield
    SCHEMES.clear()
    SCHEMES.update(saved)


@pytest.fixture()
def two_tasks(materialized: dict, tmp_path: Path) -> list[Path]:
    tasks = []
    for name in ("quarterly_report", "data_cleanup"):
        shutil.copytree(materialized[name]["dir"], tmp_path / name)
        tasks.append(tmp_path / name)
    return tasks


def _options(tmp_path: Path, run_id: str, uri: str = "harness-scripted", **kw) -> RunOptions:
    return RunOptions(model_uri=uri, contract="pick-only", concurrency=2, no_jail=True, run_id=run_id, max_steps=5,
                      skills_dirs=[], store_path=tmp_path / f"{run_id}.sqlite3", **kw)


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_ray_gives_the_outcomes_and_run_folders_of_a_local_run(local_ray, two_tasks: list[Path], tmp_path: Path) -> None:
    from veriscale.many.ray_harness import RayTasks

    tasks = [*two_tasks, tmp_path / "not_a_task"]
    here = run_tasks(tasks, _options(tmp_path, "local"), backend=PerTaskChat())
    there = run_tasks(tasks, _options(tmp_path, "ray"), remote=RayTasks(setup=register_in_worker))
    assert there["failed"] == here["failed"] == 1
    assert there["tasks"][2]["outcome"] == "error" and there["tasks"][2]["error"] == here["tasks"][2]["error"]
    for mine, theirs in zip(here["tasks"][:2], there["tasks"][:2]):
        assert (theirs["task"], theirs["outcome"], theirs["base"], theirs["revisions"]) == \
            (mine["task"], mine["outcome"], mine["base"], mine["revisions"])
        assert theirs["outcome"] == "delivered"
        local_dir, ray_dir = Path(mine["run_dir"]), Path(theirs["run_dir"])
        assert ray_dir == RunLayout.for_task(Path(mine["task_dir"]), "ray").root  # where a local run writes
        local, remote = _files(local_dir), _files(ray_dir)
        assert set(remote) == set(local)
        for rel, data in local.items():
            if rel.startswith(SAME_BYTES):
                assert remote[rel] == data, rel
        document = json.loads((ray_dir / "outcome.json").read_text())  # the driver's paths, not the worker's
        assert document["run_dir"] == str(ray_dir) and document["task_dir"] == mine["task_dir"]
        assert json.loads((ray_dir / "phases" / "resolve.json").read_text())["record"].startswith(str(ray_dir))
        scratch = Path(tempfile.gettempdir()) / "veriscale-harness" / hashlib.sha256(str(ray_dir).encode()).hexdigest()[:20]
        assert not scratch.exists()  # nothing is left only on the worker
    store = Store.open(tmp_path / "ray.sqlite3")  # the driver committed and linked every call of each task
    rows, _ = store.execute("SELECT id, json_extract(args, '$.task') FROM runs WHERE command = 'harness task'")
    assert len(rows) == 3
    for run_id, task in rows[:2]:
        outcome = next(t for t in there["tasks"] if t["task_dir"] == task)
        calls = sum(p.get("calls", 0) for p in outcome["phases"].values())
        assert calls == 6 and len({c["key"] for c in store.run_calls(run_id)}) == calls


def test_a_worker_killed_mid_task_is_replaced_and_no_committed_call_is_asked_again(
        local_ray, two_tasks: list[Path], tmp_path: Path) -> None:
    from veriscale.many.ray_harness import RayTasks

    folder = tmp_path / "witness"
    folder.mkdir()
    committed = 0

    def on_call(n: int) -> None:  # the driver committed calls: once the ledger phases' four are in, let it die
        nonlocal committed
        committed += n
        if committed >= 4:
            (folder / "go").write_text("")

    remote = RayTasks(setup=register_in_worker, on_call=on_call)
    summary = run_tasks(two_tasks[:1], _options(tmp_path, "kill", f"harness-killonce:{folder}"), remote=remote)
    (task,) = summary["tasks"]
    assert task["outcome"] == "delivered" and task["base"] == "r02"
    assert remote.attempts[str(two_tasks[0])] == 2
    killed = (folder / "killed").read_text()
    asked = {p.name.removeprefix("asked-").removesuffix(".txt"): p.read_text().split() for p in folder.glob("asked-*")}
    assert set(asked[killed]) == {"resolve", "challenge", "adjudicate"}
    (retry,) = [phases for pid, phases in asked.items() if pid != killed]
    assert set(retry) == {"adjudicate"}  # the ledger phases' calls came from the seeds


def test_a_killed_worker_after_its_retries_is_an_error_naming_it(local_ray, two_tasks: list[Path], tmp_path: Path) -> None:
    from veriscale.many.ray_harness import RayTasks

    folder = tmp_path / "witness"
    folder.mkdir()
    (folder / "go").write_text("")
    summary = run_tasks(two_tasks[:1], _options(tmp_path, "lost", f"harness-killonce:{folder}"),
                        remote=RayTasks(setup=register_in_worker, retries=0))
    (task,) = summary["tasks"]
    assert task["outcome"] == "error" and summary["failed"] == 1
    assert "the worker on node" in task["error"] and "was lost" in task["error"]


def test_the_preflight_names_the_node_and_what_it_lacks_before_any_work(local_ray, two_tasks: list[Path],
                                                                        tmp_path: Path) -> None:
    import os

    from veriscale.many.ray_harness import RayTasks

    fake = tmp_path / "bin"  # the workers' node is too old for pi: the node lacks a usable pi agent
    fake.mkdir()
    (fake / "node").write_text("#!/bin/sh\necho v10.0.0\n")
    (fake / "node").chmod(0o755)
    remote = RayTasks(setup=register_in_worker, preflight_timeout_s=90, runtime_env={"env_vars": {
        "PYTHONPATH": str(REPO), "PATH": f"{fake}:{os.environ['PATH']}"}})
    with pytest.raises(UserError) as raised:
        run_tasks(two_tasks[:1], _options(tmp_path, "pre", executor="pi"), remote=remote)
    message = str(raised.value)
    ip = local_ray.util.get_node_ip_address()
    assert f"node {ip} lacks the pi agent" in message and "too old for pi" in message and "nothing was run" in message
    assert not (two_tasks[0].parent / "quarterly_report.runs").exists()
    assert not (tmp_path / "pre.sqlite3").exists()


# --- the transfer: hostile packs -----------------------------------------------------------------


def _tar(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for info, data in members:
            info.size = len(data) if info.isreg() else 0
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buffer.getvalue()


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


def test_an_unpacked_run_folder_holds_only_plain_files_inside_it(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "runs" / "t" / "r1"
    data = _tar((_member("ok/file.txt"), b"kept"), (_member("../escape.txt"), b"x"), (_member("/abs.txt"), b"x"),
                (_member("link", tarfile.SYMTYPE, str(outside)), b""), (_member("hard", tarfile.LNKTYPE, "ok/file.txt"), b""),
                (_member("fifo", tarfile.FIFOTYPE), b""), (_member("dev", tarfile.CHRTYPE), b""),
                (_member("link/through.txt"), b"x"), (_member("bidi\u202etxt.exe"), b"x"))
    report = unpack_folder(data, dest, what="the run folder")
    assert _files(dest) == {"ok/file.txt": b"kept", "link/through.txt": b"x"}  # 'link' became a plain folder
    assert not any(p.is_symlink() for p in dest.rglob("*")) and list(outside.iterdir()) == []
    assert not (tmp_path / "runs" / "t" / "escape.txt").exists() and not Path("/abs.txt").exists()
    assert len(report.left_out) == 7


def test_a_pack_over_the_cap_is_refused_whole_and_the_old_folder_stays(tmp_path: Path) -> None:
    dest = tmp_path / "run"
    dest.mkdir()
    (dest / "old.txt").write_text("old")
    with pytest.raises(TransferRefused, match="over the 10-byte cap|more than 10 bytes"):
        unpack_folder(_tar((_member("big.bin"), b"x" * 100)), dest, max_bytes=10, what="the run folder")
    with pytest.raises(TransferRefused, match="not a sound tar"):
        unpack_folder(b"not a tar at all" * 64, dest, what="the run folder")
    assert _files(dest) == {"old.txt": b"old"} and [p.name for p in tmp_path.iterdir()] == ["run"]


def test_packing_leaves_links_and_fifos_out(tmp_path: Path) -> None:
    import os

    root = tmp_path / "task"
    (root / "a").mkdir(parents=True)
    (root / "a" / "f.txt").write_text("f")
    (root / "out").symlink_to("/etc")
    os.mkfifo(root / "pipe")
    data, left_out = pack_folder(root)
    unpack_folder(data, tmp_path / "copy")
    assert _files(tmp_path / "copy") == {"a/f.txt": b"f"} and len(left_out) == 2


# --- the flags ---------------------------------------------------------------------------------


def test_executor_builtin_still_names_the_agent_with_a_note(two_tasks: list[Path]) -> None:
    result = CliRunner().invoke(app, ["harness", "run", str(two_tasks[0]), "--model", "nonsense:x", "--no-jail",
                                      "--executor", "builtin"])
    assert "now --agent builtin" in result.output and "unknown model URI" in result.output and result.exit_code == 2


@pytest.mark.parametrize("args, message", [
    (["--executor", "cloud"], "is unknown: use local or ray"),
    (["--address", "127.0.0.1:6379"], "add --executor ray"),
    (["--executor", "pi", "--agent", "builtin"], "two agent loops"),
    (["--agent", "claude"], "unknown: use builtin or pi"),
])
def test_bad_executor_agent_and_address_flags_are_one_sentence(two_tasks: list[Path], args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["harness", "run", str(two_tasks[0]), "--model", "nonsense:x", "--no-jail", *args])
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output


def test_a_model_uri_no_scheme_reads_is_one_sentence_on_the_driver_before_any_work(two_tasks: list[Path]) -> None:
    pytest.importorskip("ray")
    result = CliRunner().invoke(app, ["harness", "run", str(two_tasks[0]), "--model", "nonsense:x", "--no-jail",
                                      "--executor", "ray", "--address", "127.0.0.1:1"])
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2 and len(errors) == 1 and "unknown model URI 'nonsense:x'" in errors[0]
    assert not (two_tasks[0].parent / "quarterly_report.runs").exists()


def test_an_address_nothing_answers_at_is_one_sentence_before_any_work(two_tasks: list[Path]) -> None:
    pytest.importorskip("ray")
    result = CliRunner().invoke(app, ["harness", "run", str(two_tasks[0]), "--model", "http://127.0.0.1:9/v1#m",
                                      "--no-jail", "--executor", "ray", "--address", "127.0.0.1:1"])
    assert result.exit_code == 2 and "nothing answers at --address 127.0.0.1:1" in result.output
    assert not (two_tasks[0].parent / "quarterly_report.runs").exists()


def test_a_task_clears_the_scratch_folders_killed_workers_left_and_spares_live_ones(tmp_path: Path) -> None:
    import fcntl

    from veriscale.many.ray_harness_worker import claimed_scratch

    root = tmp_path / "veriscale-harness"
    (root / "killed" / "tasks").mkdir(parents=True)   # a worker killed mid-task left this (no lock held)
    (root / "killed" / "tasks" / "deliverable.txt").write_text("x")
    (root / "live" / "tasks").mkdir(parents=True)     # another task running on this node holds its lock
    held = os.open(root / "live.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        with claimed_scratch(root, "mine") as scratch:
            assert scratch == root / "mine" and scratch.is_dir()
            assert not (root / "killed").exists()       # cleared: nothing stays only on a worker
            assert (root / "live" / "tasks").is_dir()   # a live task's folder is left alone
        assert not (root / "mine").exists()
    finally:
        os.close(held)
    # what stays: the live task's folder and its lock; the killed one's lock and this task's are gone
    assert sorted(p.name for p in root.iterdir()) == ["live", "live.lock"]


def test_a_lock_file_removed_while_a_worker_waited_on_it_is_taken_again_on_the_file_there_now(tmp_path: Path) -> None:
    """A holder removes its lock file on release; a worker that was waiting on the removed file must
    not take it as its own while a newcomer holds the file now at that path."""
    import threading

    from veriscale.many.ray_harness_worker import lock_file, release_lock_file

    path = tmp_path / "task.lock"
    first = lock_file(path)
    got: list[int] = []
    waiter = threading.Thread(target=lambda: got.append(lock_file(path)))
    waiter.start()
    newcomer = None
    try:
        time.sleep(0.2)  # the waiter blocks on the first holder's file
        path.unlink()  # the first holder releases: its file goes ...
        newcomer = lock_file(path)  # ... and a newcomer takes a new file at the path before the waiter wakes
        os.close(first)
        waiter.join(0.5)
        assert got == [], "the waiter took a removed lock file as its own while the newcomer held the lock"
    finally:
        if newcomer is not None:
            release_lock_file(path, newcomer)
        waiter.join(30)
    [mine] = got
    assert os.fstat(mine).st_ino == os.stat(path).st_ino  # it holds the file at the path
    release_lock_file(path, mine)
    assert not path.exists()
