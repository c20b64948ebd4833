"""A `running` run is interrupted only when its heartbeat is stale and no live process matches it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from veriscale.engine.run_liveness import ProcessIdentity, process_start, settle_dead_runs
from veriscale.engine.run_scope import recorded_run
from veriscale.engine.store import Store

STALE_S = 2.0


@pytest.fixture()
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("VERISCALE_RUN_STALE_S", str(STALE_S))
    return Store.open(tmp_path / "s.sqlite3")


@pytest.fixture()
def other_process():
    """A live process that is not a veriscale run (its pid stands for a reused one)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        deadline = time.monotonic() + 60
        while process_start(proc.pid) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        yield proc
    finally:
        proc.kill()
        proc.wait(30)


def _row(store: Store, owner: ProcessIdentity, heartbeat_age_s: float) -> int:
    run_id = store.start_run("select", "m", {}, owner=owner)
    store.execute("UPDATE runs SET heartbeat_at = ?, created_at = ? WHERE id = ?",
                  (time.time() - heartbeat_age_s, time.time() - heartbeat_age_s, run_id))
    return run_id


def test_process_identity_reads_this_process():
    me = ProcessIdentity.current()
    assert me.pid == os.getpid() and me.host == socket.gethostname()
    assert me.start is not None and me.boot_id, "this test machine has /proc"
    assert me.alive()


def test_a_reused_pid_does_not_keep_a_dead_run_alive(store, other_process):
    here = ProcessIdentity.current()
    start = process_start(other_process.pid)
    reused = _row(store, ProcessIdentity(here.host, here.boot_id, other_process.pid, start - 1), 10 * STALE_S)
    same = _row(store, ProcessIdentity(here.host, here.boot_id, other_process.pid, start), 10 * STALE_S)
    assert settle_dead_runs(store) == [reused]
    assert store.run(reused).status == "interrupted"
    assert f"pid {other_process.pid}" in store.run(reused).result["error"]
    assert store.run(same).status == "running", "that very process still runs: its heartbeat alone proves nothing"


def test_a_dead_pid_of_this_host_is_interrupted_at_once_whatever_its_heartbeat(store, other_process):
    here = ProcessIdentity.current()
    owner = ProcessIdentity(here.host, here.boot_id, other_process.pid, process_start(other_process.pid))
    other_process.kill()
    other_process.wait(30)
    fresh = _row(store, owner, 0.0)
    stale = _row(store, owner, 10 * STALE_S)
    assert sorted(settle_dead_runs(store)) == sorted([fresh, stale])


def test_a_run_of_another_pid_namespace_waits_for_its_heartbeat(store):
    """Same host name and kernel, another pid namespace (a container sharing the store): its pid
    means nothing here, so a fresh heartbeat keeps the run open even though no such pid is seen."""
    here = ProcessIdentity.current()
    boot = here.boot_id.split("/")[0]
    elsewhere = ProcessIdentity(here.host, f"{boot}/pidns1", 2 ** 22 - 1, 1)
    fresh = _row(store, elsewhere, 0.0)
    stale = _row(store, elsewhere, 2 * STALE_S)
    assert settle_dead_runs(store) == [stale] and store.run(fresh).status == "running"


def test_a_run_of_another_host_is_judged_by_its_heartbeat_alone_with_a_longer_threshold(store):
    far = ProcessIdentity("some-other-host", "another-boot", 1, 1)
    fresh = _row(store, far, 0.0)
    quiet = _row(store, far, 3 * STALE_S)  # stale here, but not for another host
    gone = _row(store, far, 30 * STALE_S)
    assert settle_dead_runs(store) == [gone]
    assert store.run(fresh).status == store.run(quiet).status == "running"


def test_a_run_of_this_host_before_its_last_reboot_is_dead_once_stale(store):
    here = ProcessIdentity.current()
    before_boot = ProcessIdentity(here.host, "an-earlier-boot", os.getpid(), here.start)  # even "our" pid
    fresh = _row(store, before_boot, 0.0)
    stale = _row(store, before_boot, 2 * STALE_S)
    assert settle_dead_runs(store) == [stale] and store.run(fresh).status == "running"


def test_a_run_left_from_before_heartbeats_is_judged_by_its_age(store):
    old = _row(store, ProcessIdentity(None, None, None, None), 30 * STALE_S)
    store.execute("UPDATE runs SET heartbeat_at = NULL WHERE id = ?", (old,))
    recent = _row(store, ProcessIdentity(None, None, None, None), 0.0)
    store.execute("UPDATE runs SET heartbeat_at = NULL WHERE id = ?", (recent,))
    assert settle_dead_runs(store) == [old]


def test_an_open_run_beats_its_heartbeat(store):
    with recorded_run(store, "score", "m", {}) as run:
        first = store.run(run.id).heartbeat_at
        deadline = time.monotonic() + 60
        while store.run(run.id).heartbeat_at == first and time.monotonic() < deadline:
            time.sleep(0.05)
        assert store.run(run.id).heartbeat_at > first
        assert settle_dead_runs(store) == []
    assert store.run(run.id).status == "ok"


def test_a_settled_run_that_ended_meanwhile_is_left_as_it_ended(store, other_process):
    here = ProcessIdentity.current()
    run_id = _row(store, ProcessIdentity(here.host, here.boot_id, other_process.pid, 1), 10 * STALE_S)
    store.finish_run(run_id, "ok", {"best": 0})
    assert settle_dead_runs(store) == [] and store.run(run_id).status == "ok"
