"""Fuzz the store: a real store, damaged one of the ways a disk, a crash or another program damages it,
then a command run on it by the real CLI (``python -m veriscale`` in a subprocess).

Damages (drawn): garbage bytes over a random range of the file; the file cut at a random length;
a table dropped; the cached ``calls.response`` cut; a lock held by another process (``BEGIN
EXCLUSIVE``); the store read-only (a read-only bind mount); the disk full (a tmpfs of 1-4 MiB filled
to a drawn few bytes). Both mounts are made in a user and mount namespace (``unshare -r -m``).
Commands (drawn): ``runs list``, ``runs show``, a ``compare`` of two short texts, a ``select`` over
two short candidate files; the model is ``tests/support/fault_server.py``'s HTTP double on
127.0.0.1, which answers at once (no model is loaded).

Property: each command exits 0, or exits non-zero with one ``error:`` line (notes and warnings
aside) that names the store file; never a traceback, never a crash by signal, never past the hang
guard (``guard.HANG_S``). Where the damage is undone (the lock released, the mount gone, the disk
freed) or left the runs table alone (a cut response), every run the store held before still reads.

The template store (one compare, one select: two runs and their calls) is made once per module by
real runs; each example damages a fresh copy.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.guard import CAUSES, HANG_S, Hang, failed, one_sentence_problem, outcome
from tests.fuzz.profile import fuzz_settings
from tests.support.fault_server import FaultServer

SUITE = "stores"
ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
PREFIXES = ("error:", "note:", "warning:", "progress:")  # progress: the status line a long command prints
STEP = ' ; echo "==RC==$?"; echo "==END=="; echo "==END==" >&2'
COMMANDS = ("runs list", "runs show", "compare", "select")
WORDS = ["the", "answer", "is", "42", "because", "x", "=", "y", "sorted", "list", "é", "日本", "\t", "-", "#"]


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p))
    env.setdefault("VERISCALE_STORE_WAIT", "5")  # no lock is expected outside the lock examples: fail fast
    env.update(extra)
    return env


def _run(argv: list[str], what: str, **env: str) -> subprocess.CompletedProcess:
    """``argv`` in its own process group under the fuzz hang guard (the whole group is killed past it)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(**env),
                            start_new_session=True, cwd=ROOT)
    try:
        out, err = proc.communicate(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        exc = Hang(f"{what[:300]!r} ran past the {HANG_S:g} s hang guard")
        raise failed(SUITE, exc, what) from None
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _veriscale(*args: object) -> list[str]:
    return [sys.executable, "-m", "veriscale", *map(str, args)]


# -- the template ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server():
    with FaultServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def template(server, tmp_path_factory) -> dict:
    """A store made by a real compare and a real select, checkpointed into one file; its runs and tables."""
    root = tmp_path_factory.mktemp("stores")
    path = root / "store.sqlite3"
    pair = ROOT / "examples" / "pair"
    model = server.url + "#fault-model"
    for argv in (["compare", pair / "task.md", pair / "a.md", pair / "b.md", "--model", model, "--json"],
                 ["select", "--task", pair / "task.md", pair / "a.md", pair / "b.md", "--model", model]):
        done = _run(_veriscale(*argv, "--store", path), "template")
        assert done.returncode == 0, done.stderr[-3000:]
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                        "AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    calls = con.execute("SELECT count(*) FROM calls").fetchone()[0]
    con.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    runs = _runs_of(_run(_veriscale("runs", "list", "--json", "--store", path), "template runs"))
    assert [r[1] for r in runs] == ["select", "compare"] and calls > 0, (runs, calls)
    return {"path": path, "runs": runs, "tables": tables, "size": path.stat().st_size, "model": model}


def _runs_of(proc: subprocess.CompletedProcess) -> list[tuple[int, str, str]]:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [(r["id"], r["command"], r["status"]) for r in json.loads(proc.stdout)]


def _namespaces() -> None:
    probe = subprocess.run(["unshare", "-r", "-m", "sh", "-c", "mount -t tmpfs tmpfs /mnt"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no user and mount namespace here: {probe.stderr.decode(errors='replace').strip()}")


# -- commands -------------------------------------------------------------------------------------
@st.composite
def texts(draw) -> str:
    """A short non-empty text (words, some not ASCII)."""
    words = draw(st.lists(st.sampled_from(WORDS) | st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]),
                                                            min_size=1, max_size=8), min_size=1, max_size=12))
    text = " ".join(words).strip()
    return text if text else "an answer"


@st.composite
def commands(draw, runs: list[tuple[int, str, str]]) -> dict:
    kind = draw(st.sampled_from(COMMANDS))
    command = {"kind": kind}
    if kind == "runs list":
        command["flags"] = draw(st.sampled_from([["--json"], [], ["--limit", "1", "--json"]]))
    elif kind == "runs show":
        command["id"] = draw(st.sampled_from([r[0] for r in runs]))
        command["flags"] = draw(st.sampled_from([[], ["--calls"]]))
    else:
        command["texts"] = [draw(texts()) for _ in range(3)]  # task, then two answers
    return command


def argv_of(command: dict, store: Path, inputs: Path, model: str) -> list[str]:
    """The command line of ``command`` on ``store``, its input files written under ``inputs``."""
    kind = command["kind"]
    if kind == "runs list":
        args = ["runs", "list", *command["flags"]]
    elif kind == "runs show":
        args = ["runs", "show", str(command["id"]), *command["flags"]]
    else:
        inputs.mkdir(parents=True, exist_ok=True)
        files = []
        for name, text in zip(("task.md", "a.md", "b.md"), command["texts"]):
            (inputs / name).write_text(text + "\n", encoding="utf-8")
            files.append(str(inputs / name))
        if kind == "compare":
            args = ["compare", *files, "--model", model, "--json"]
        else:
            args = ["select", "--task", files[0], files[1], files[2], "--model", model]
    return _veriscale(*args, "--store", store)


def check(rc: int, stdout: str, stderr: str, store: Path, what: str, *, empty: bool = False) -> bool:
    """Exit 0, or one ``error:`` line naming the store; never a traceback or a signal. True when accepted.

    ``empty``: the file was cut to nothing, which SQLite reads as a new, empty store, so ``runs show``
    may answer that the run is not there (an answer about the store's content, not a fault of its file)."""
    if "Traceback" in stdout + stderr:
        outcome(SUITE, "traceback")
        raise AssertionError(f"a traceback (exit {rc}) for {what!r}: {stderr[-3000:]}{stdout[-1000:]}")
    if rc == 0:
        outcome(SUITE, "accepted")
        return True
    problem = None
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:")]
    if rc < 0 or rc > 125:
        problem = f"ended by signal or shell status {rc}"
    elif len(errors) != 1:
        problem = f"{len(errors)} error lines"
    elif any(not ln.startswith(PREFIXES) for ln in lines):
        problem = "the error spans several lines"
    else:
        problem = one_sentence_problem(errors[0][len("error:"):])
        if problem is None and str(store) not in errors[0] and not (empty and "there is no run" in errors[0]):
            problem = "the error does not name the store file"
    if problem is not None:
        outcome(SUITE, "traceback")
        raise AssertionError(f"{problem} (exit {rc}) for {what!r}: {stderr[-3000:]!r}")
    outcome(SUITE, "rejected")
    return False


def still_readable(proc: subprocess.CompletedProcess, template: dict, what: str) -> None:
    """Every run of the template reads as it did (the command may have added runs)."""
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, (what, proc.returncode, proc.stderr[-3000:])
    found = set(_runs_of(proc))
    lost = [r for r in template["runs"] if r not in found]
    assert not lost, f"runs {lost} no longer read after {what!r} was undone: {sorted(found)}"


# -- damages to the file --------------------------------------------------------------------------
@st.composite
def file_damages(draw, size: int, tables: list[str]) -> dict:
    kind = draw(st.sampled_from(["garbage", "cut", "drop", "response"]))
    if kind == "garbage":
        start = draw(st.integers(0, size - 1))
        length = draw(st.integers(1, min(size - start, draw(st.sampled_from([16, 4096, 65536, size])))))
        fill = draw(st.sampled_from(["random", "zeros", "ones"]))
        return {"kind": kind, "start": start, "length": length, "fill": fill, "seed": draw(st.integers(0, 2**32 - 1))}
    if kind == "cut":
        return {"kind": kind, "length": draw(st.integers(0, size - 1))}
    if kind == "drop":
        return {"kind": kind, "table": draw(st.sampled_from(tables))}
    return {"kind": kind, "keep": draw(st.integers(0, 64)), "every": draw(st.sampled_from([1, 2, 3]))}


def damage_file(store: Path, damage: dict) -> None:
    kind = damage["kind"]
    if kind in ("garbage", "cut"):
        data = bytearray(store.read_bytes())
        if kind == "cut":
            del data[damage["length"]:]
        else:
            start, length = damage["start"], damage["length"]
            fill = {"zeros": bytes(length), "ones": b"\xff" * length}.get(damage["fill"])
            data[start:start + length] = fill or random.Random(damage["seed"]).randbytes(length)
        store.write_bytes(bytes(data))
        return
    con = sqlite3.connect(store, isolation_level=None)
    try:
        if kind == "drop":
            con.execute(f'DROP TABLE "{damage["table"]}"')
        else:
            con.execute("UPDATE calls SET response = substr(response, 1, ?) WHERE rowid % ? = 0",
                        (damage["keep"], damage["every"]))
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        con.close()


@fuzz_settings(24, shrink=False)
@given(data=st.data())
def test_a_damaged_store_file_answers_or_refuses_in_one_sentence(template, data):
    damage = data.draw(file_damages(template["size"], template["tables"]), label="damage")
    command = data.draw(commands(template["runs"]), label="command")
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store" / "store.sqlite3"
        store.parent.mkdir()
        shutil.copy(template["path"], store)
        damage_file(store, damage)
        argv = argv_of(command, store, Path(tmp) / "inputs", template["model"])
        what = f"{damage} then {shlex.join(argv[2:])}"
        proc = _run(argv, what)
        check(proc.returncode, proc.stdout, proc.stderr, store, what,
              empty=damage["kind"] == "cut" and damage["length"] == 0)
        if damage["kind"] == "response":  # the runs table is untouched: its runs read as before
            still_readable(_run(_veriscale("runs", "list", "--json", "--store", store), what), template, what)


# -- another process's lock -----------------------------------------------------------------------
HOLDER = ("import sqlite3, sys, time\n"
          "c = sqlite3.connect(sys.argv[1], isolation_level=None)\nc.execute('BEGIN EXCLUSIVE')\n"
          "print('held', flush=True)\ntime.sleep(600)")


@fuzz_settings(8, shrink=False)
@given(data=st.data())
def test_a_store_locked_by_another_process_answers_or_refuses_in_one_sentence(template, data):
    command = data.draw(commands(template["runs"]), label="command")
    wait = data.draw(st.sampled_from(["0.2", "0.5", "1"]), label="wait")
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store" / "store.sqlite3"
        store.parent.mkdir()
        shutil.copy(template["path"], store)
        argv = argv_of(command, store, Path(tmp) / "inputs", template["model"])
        what = f"locked (wait {wait} s) then {shlex.join(argv[2:])}"
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(store)], stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().strip() == "held"
            proc = _run(argv, what, VERISCALE_STORE_WAIT=wait)
            check(proc.returncode, proc.stdout, proc.stderr, store, what)
        finally:
            holder.kill()
            holder.wait(30)
        still_readable(_run(_veriscale("runs", "list", "--json", "--store", store), what), template, what)


# -- a read-only mount and a full disk (in a user and mount namespace) ----------------------------
def _split(proc: subprocess.CompletedProcess, parts: int, what: str) -> list[tuple[int, str, str]]:
    """The ``parts`` commands a namespace script ran, each echoing ``==RC==<rc>`` after itself."""
    outs, errs = proc.stdout.split("==END==\n"), proc.stderr.split("==END==\n")
    assert len(outs) > parts and len(errs) > parts, (what, proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    found = []
    for out, err in zip(outs[:parts], errs[:parts]):
        body, _, rc = out.rpartition("==RC==")
        found.append((int(rc.strip()), body, err))
    return found


@fuzz_settings(8, shrink=False)
@given(data=st.data())
def test_a_store_on_a_read_only_mount_answers_or_refuses_in_one_sentence(template, data):
    _namespaces()
    command = data.draw(commands(template["runs"]), label="command")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "store"
        folder.mkdir()
        store = folder / "store.sqlite3"
        shutil.copy(template["path"], store)
        argv = argv_of(command, store, Path(tmp) / "inputs", template["model"])
        what = f"read-only mount then {shlex.join(argv[2:])}"
        script = (f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && "
                  f"{shlex.join(argv)}{STEP}")
        ((rc, out, err),) = _split(_run(["unshare", "-r", "-m", "sh", "-c", script], what), 1, what)
        check(rc, out, err, store, what)
        # the namespace, and with it the mount, is gone: the store is writable again
        still_readable(_run(_veriscale("runs", "list", "--json", "--store", store), what), template, what)


FILL = ("import os, sys\nf = open(sys.argv[1], 'wb', buffering=0)\ntry:\n    while True: f.write(bytes(4096))\n"
        "except OSError: pass\nf.close()\nsize = os.path.getsize(sys.argv[1])\n"
        "os.truncate(sys.argv[1], max(0, size - int(sys.argv[2])))")


@fuzz_settings(8, shrink=False)
@given(data=st.data())
def test_a_store_on_a_full_disk_answers_or_refuses_in_one_sentence(template, data):
    _namespaces()
    command = data.draw(commands(template["runs"]), label="command")
    mib = data.draw(st.integers(1, 4), label="tmpfs MiB")
    free = data.draw(st.sampled_from([0, 0, 4096, 65536, 262144]), label="bytes left free")
    with tempfile.TemporaryDirectory() as tmp:
        disk = Path(tmp) / "disk"
        disk.mkdir()
        store = disk / "store.sqlite3"
        argv = argv_of(command, store, Path(tmp) / "inputs", template["model"])
        what = f"full {mib} MiB disk ({free} bytes free) then {shlex.join(argv[2:])}"
        filler = disk / "filler"
        script = (f"mount -t tmpfs -o size={mib}m tmpfs {disk} && cp {template['path']} {store} && "
                  f"{shlex.join([sys.executable, '-c', FILL, str(filler), str(free)])} && "
                  f"{shlex.join(argv)}{STEP}; rm -f {filler}; "
                  f"{shlex.join(_veriscale('runs', 'list', '--json', '--store', store))}{STEP}")
        (rc, out, err), (lrc, lout, lerr) = _split(_run(["unshare", "-r", "-m", "sh", "-c", script], what), 2, what)
        check(rc, out, err, store, what)
        # the filler removed, the disk has room again (the tmpfs lives as long as the namespace)
        still_readable(subprocess.CompletedProcess([], lrc, lout, lerr), template, what)
