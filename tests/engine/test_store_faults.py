"""Every store fault is one sentence naming the store and the fix, with nothing committed lost, and a
run killed on this host reads ``interrupted`` as soon as its process is gone (issue 30, item 5).

Each test drives the real CLI (``python -m veriscale``) against a real SQLite file: damaged bytes,
a cut cached response, a dropped table, a read-only mount and a full disk (both in a user and mount
namespace: ``unshare -r -m``), another process's ``BEGIN EXCLUSIVE``, and a SIGKILL mid-run.
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
import time
from pathlib import Path

import pytest

from tests.support.fault_server import FaultServer

EX = Path(__file__).resolve().parents[2] / "examples" / "pair"
SRC = Path(__file__).resolve().parents[2] / "src"
CALLS = 12  # model calls of one compare of the example pair


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p))
    env.update(extra)
    return env


def _compare(url: str) -> list[str]:
    return ["compare", str(EX / "task.md"), str(EX / "a.md"), str(EX / "b.md"), "--model", url + "#fault-model",
            "--json"]


def cli(*args: str, store: Path, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "veriscale", *args, "--store", str(store)], capture_output=True,
                          text=True, timeout=timeout, env=_env(**env))


# ``python -m veriscale`` with every sqlite3 connection to the store recording the busy wait SQLite
# applies to it (``PRAGMA busy_timeout``, ms) into the file $RECORD_WAITS names
_RECORDING_MAIN = """\
import os, runpy, sqlite3, sys
real, store, record = sqlite3.connect, os.path.realpath(sys.argv[1]), os.environ["RECORD_WAITS"]
def connect(target, *args, **kwargs):
    conn = real(target, *args, **kwargs)
    if os.path.realpath(str(target).removeprefix("file:").split("?")[0]) == store:
        with open(record, "a") as out:
            out.write(f"{conn.execute('PRAGMA busy_timeout').fetchone()[0]}\\n")
    return conn
sqlite3.connect = connect
sys.argv[1:2] = []
runpy.run_module("veriscale", run_name="__main__", alter_sys=True)
"""


def _cli_recording_waits(*args: str, store: Path, record: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _RECORDING_MAIN, str(store), *args, "--store", str(store)],
                          capture_output=True, text=True, timeout=120, env=_env(RECORD_WAITS=str(record), **env))


def assert_one_sentence(proc: subprocess.CompletedProcess, *needles: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    err = " ".join(proc.stderr.split())
    assert err.startswith("error:"), err
    for needle in needles:
        assert needle in err, err
    return err


@pytest.fixture(scope="module")
def server():
    with FaultServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def template(server, tmp_path_factory) -> Path:
    """A store holding one finished compare (one run, 12 answered calls)."""
    path = tmp_path_factory.mktemp("template") / "store.sqlite3"
    done = cli(*_compare(server.url), store=path)
    assert done.returncode == 0, done.stderr
    return path


@pytest.fixture()
def store(template, tmp_path) -> Path:
    path = tmp_path / "store.sqlite3"
    shutil.copy(template, path)
    return path


def _ns(script: str, timeout: float = 180) -> subprocess.CompletedProcess:
    """``script`` run by sh as root of a new user and mount namespace (skips where there is none)."""
    probe = subprocess.run(["unshare", "-r", "-m", "sh", "-c", "mount -t tmpfs tmpfs /mnt"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no user and mount namespace here: {probe.stderr.decode(errors='replace').strip()}")
    return subprocess.run(["unshare", "-r", "-m", "sh", "-c", script], capture_output=True, text=True,
                          timeout=timeout, env=_env())


def _veriscale(*args: object) -> str:
    return " ".join(shlex.quote(str(a)) for a in (sys.executable, "-m", "veriscale", *args))


def _split(proc: subprocess.CompletedProcess, parts: int) -> list[tuple[int, str, str]]:
    """The ``parts`` commands a namespace script ran, each echoing ``==RC==<rc>`` after itself."""
    outs, errs = proc.stdout.split("==END==\n"), proc.stderr.split("==END==\n")
    assert len(outs) > parts and len(errs) > parts, (proc.stdout[-3000:], proc.stderr[-3000:])
    found = []
    for out, err in zip(outs[:parts], errs[:parts]):
        body, _, rc = out.rpartition("==RC==")
        found.append((int(rc.strip()), body, err))
    return found


STEP = ' ; echo "==RC==$?"; echo "==END=="; echo "==END==" >&2'


# -- a damaged file ------------------------------------------------------------------------------
def test_a_store_with_garbage_over_its_middle_is_one_sentence_on_how_to_recover(store):
    con = sqlite3.connect(store)
    con.executemany("INSERT INTO runs (command, model, args, status, result, created_at) VALUES (?, ?, ?, 'ok', ?, ?)",
                    [("score", "m", json.dumps({"i": i, "pad": "x" * 300}), json.dumps({"reward": 0.5}), time.time())
                     for i in range(3000)])
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    data = bytearray(store.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 256 * 1024] = random.Random(7).randbytes(256 * 1024)
    store.write_bytes(bytes(data))

    listed = cli("runs", "list", "--limit", "100000", "--json", store=store)
    err = assert_one_sentence(listed, f"store file '{store}' is damaged", ".recover", "move it aside", "--store")
    assert "malformed" in err


def test_a_store_that_lacks_its_calls_table_is_one_sentence(store, server):
    con = sqlite3.connect(store)
    con.execute("DROP TABLE calls")
    con.commit()
    con.close()
    proc = cli(*_compare(server.url), store=store)
    assert_one_sentence(proc, f"store file '{store}' is damaged", "lacks its calls table", "move it aside")


def test_a_cached_response_cut_short_is_a_cache_miss_made_again(store, server):
    con = sqlite3.connect(store)
    con.execute("UPDATE calls SET response = substr(response, 1, 10)")
    con.commit()
    con.close()
    again = cli(*_compare(server.url), store=store)
    assert again.returncode == 0, again.stderr
    assert "Traceback" not in again.stderr
    assert json.loads(again.stdout)["usage"]["model_calls"] == CALLS  # every cut answer asked again
    third = cli(*_compare(server.url), store=store)
    assert third.returncode == 0, third.stderr
    usage = json.loads(third.stdout)["usage"]
    assert usage["model_calls"] == 0 and usage["cache_hits"] == CALLS  # and stored whole this time


# -- another process's lock ----------------------------------------------------------------------
def test_a_store_locked_by_another_process_fails_after_the_wait_setting_naming_it(store, server):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys, time\n"
         "c = sqlite3.connect(sys.argv[1], isolation_level=None)\nc.execute('BEGIN EXCLUSIVE')\n"
         "print('held', flush=True)\ntime.sleep(120)", str(store)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        waits = store.parent / "busy-waits.txt"
        proc = _cli_recording_waits(*_compare(server.url), store=store, record=waits, VERISCALE_STORE_WAIT="0.5")
        assert_one_sentence(proc, f"store file '{store}' is locked by another process", "0.5 s", "--store-wait")
        # the wait SQLite applied to each store connection is the 0.5 s setting, not the 30 s default
        applied = waits.read_text().split()
        assert applied and set(applied) == {"500"}, applied
        listed = cli("runs", "list", "--json", store=store, VERISCALE_STORE_WAIT="0.5")  # reading still works
        assert listed.returncode == 0, listed.stderr
        assert [r["command"] for r in json.loads(listed.stdout)] == ["compare"]
    finally:
        holder.kill()
        holder.wait(30)


def test_a_store_created_while_another_connection_writes_it_waits_instead_of_failing_at_once(tmp_path):
    """SQLite refuses the switch to WAL at once (no busy wait) while another connection holds the write
    lock of a file still in rollback mode: the opener waits for it like any other lock."""
    import threading

    from veriscale.engine.store import Store

    path = tmp_path / "new.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # a file in rollback mode, its write lock held
    holder.execute("CREATE TABLE other (x)")
    started, outcome = threading.Event(), []

    def open_it():
        started.set()
        try:
            outcome.append(Store.open(path))
        except Exception as exc:  # noqa: BLE001 - what the assertion below reports
            outcome.append(exc)

    opener = threading.Thread(target=open_it)
    opener.start()
    started.wait(30)
    time.sleep(0.3)  # the opener meets the held lock (before the fix it failed here, at once)
    holder.execute("COMMIT")
    opener.join(60)
    [opened] = outcome
    assert not isinstance(opened, Exception), opened
    try:
        assert opened.execute("PRAGMA journal_mode")[0][0][0] == "wal"
    finally:
        opened.close()
        holder.close()


# -- a read-only mount ---------------------------------------------------------------------------
def test_a_store_on_a_read_only_mount_still_reads_and_refuses_writes_in_one_sentence(store, server):
    folder = store.parent
    script = (f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && "
              f"{_veriscale('runs', 'list', '--json', '--store', store)}{STEP}; "
              f"{_veriscale('runs', 'show', '1', '--calls', '--store', store)}{STEP}; "
              f"{_veriscale(*_compare(server.url), '--store', store)}{STEP}")
    (lrc, lout, lerr), (src, sout, serr), (wrc, wout, werr) = _split(_ns(script), 3)
    assert lrc == 0 and "Traceback" not in lerr, lerr
    assert [r["command"] for r in json.loads(lout)] == ["compare"]
    assert src == 0 and json.loads(sout)["status"] == "ok", serr
    err = " ".join(werr.split())
    assert wrc == 2 and "Traceback" not in werr, werr
    assert f"store file '{store}' is read-only" in err and "runs list" in err and "--store" in err, err


# -- a full disk ---------------------------------------------------------------------------------
def test_a_full_disk_names_the_space_needed_and_keeps_what_was_committed(template, server, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    store = disk / "store.sqlite3"
    fill = (f"{shlex.quote(sys.executable)} -c \"f = open('{disk}/filler', 'wb')\n"
            "try:\n    while True: f.write(bytes(65536)); f.flush()\nexcept OSError: pass\"")
    script = (f"mount -t tmpfs -o size=2m tmpfs {disk} && cp {template} {store} && {fill} && "
              f"{_veriscale(*_compare(server.url), '--store', store)}{STEP}; rm {disk}/filler; "
              f"{_veriscale('runs', 'list', '--json', '--store', store)}{STEP}")
    (wrc, _wout, werr), (lrc, lout, lerr) = _split(_ns(script), 2)
    err = " ".join(werr.split())
    assert wrc == 2 and "Traceback" not in werr, werr
    assert f"store file '{store}': its disk is full" in err and "free at least 4 MiB" in err, err
    assert "committed before stays" in err and "not a readable" not in err, err
    assert lrc == 0, lerr
    runs = json.loads(lout)
    assert runs[-1]["command"] == "compare" and runs[-1]["status"] == "ok"  # the first run, intact


# -- a killed run --------------------------------------------------------------------------------
def test_a_run_killed_on_this_host_reads_interrupted_at_once(tmp_path):
    store = tmp_path / "store.sqlite3"
    with FaultServer(delay_s=0.5) as slow:
        proc = subprocess.Popen([sys.executable, "-m", "veriscale", *_compare(slow.url), "--concurrency", "1",
                                 "--store", str(store)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=_env())
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5)
                    if con.execute("SELECT count(*) FROM calls WHERE status = 'ok'").fetchone()[0] >= 1:
                        break
                except sqlite3.Error:
                    pass
                time.sleep(0.05)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
    listed = cli("runs", "list", "--json", store=store, VERISCALE_RUN_STALE_S="30")
    assert listed.returncode == 0, listed.stderr
    (run,) = json.loads(listed.stdout)
    assert run["status"] == "interrupted"
