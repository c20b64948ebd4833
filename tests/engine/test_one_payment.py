"""One call, one payment, across processes: two real processes selecting on one store against
a counting OpenAI-compatible server (tests/support/fault_server.py) send each call once; a
holder SIGKILLed mid-call loses its claim when its lease lapses, and the waiter takes over."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.support.fault_server import FaultServer
from veriscale.engine.store import Store

REPO = Path(__file__).resolve().parents[2]
GUARD_S = 300  # a hang guard only: each wait ends on an event


def _worker(store: Path, url: str, key: str, lease_s: float, out: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    return subprocess.Popen([sys.executable, "-m", "tests.support.select_worker", str(store), url, key,
                             str(lease_s), str(out)], cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)


def _body(request: dict) -> str:
    return json.dumps(request["body"], sort_keys=True)


def _by(server: FaultServer, key: str) -> list[str]:
    return [_body(r) for r in server.requests if r["headers"].get("Authorization") == f"Bearer {key}"]


def _wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + GUARD_S
    while not condition():
        assert time.monotonic() < deadline, f"hang guard: {what}"
        time.sleep(0.02)


def test_two_processes_selecting_on_one_store_send_each_call_once(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite3"
    Store.open(store).close()  # migrated once, before both start
    with FaultServer(delay_s=0.02) as server:
        procs = [_worker(store, server.url, key, 30.0, tmp_path / f"{key}.json") for key in ("A", "B")]
        errors = [p.communicate(timeout=GUARD_S)[1] for p in procs]
        assert [p.returncode for p in procs] == [0, 0], errors
        bodies = [_body(r) for r in server.requests]
    picks = [json.loads((tmp_path / f"{key}.json").read_text()) for key in ("A", "B")]
    assert picks[0]["best"] == picks[1]["best"] and picks[0]["scores"] == picks[1]["scores"]
    assert len(set(bodies)) == 96 and len(bodies) == 96  # 96 distinct calls, 96 upstream requests
    assert Store.open(store).count_calls("ok") == 96


def test_a_killed_holders_calls_are_taken_over_and_answered_once_after_the_kill(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite3"
    Store.open(store).close()
    with FaultServer() as server:
        server.hold_after(6)  # the holder gets six answers, then its calls hang at the server
        holder = _worker(store, server.url, "A", 1.5, tmp_path / "A.json")
        _wait_until(lambda: len(server.requests) >= 8, "the holder's calls in flight")  # 6 answered, 2 held
        waiter = _worker(store, server.url, "B", 1.5, tmp_path / "B.json")
        # the waiter has checked its labels (a tokenize probe): next it finds the holder's claims and waits
        _wait_until(lambda: any(p["headers"].get("Authorization") == "Bearer B" for p in server.probes),
                    "the waiter's start")
        assert _by(server, "B") == []  # it sends nothing the holder has in flight
        holder.send_signal(signal.SIGKILL)
        holder.wait(GUARD_S)
        answered_before, in_flight = _by(server, "A")[:6], _by(server, "A")[6:]
        server.release()
        _, err = waiter.communicate(timeout=GUARD_S)
        assert waiter.returncode == 0, err
        by_waiter = _by(server, "B")
    assert len(in_flight) == 2
    assert Counter(by_waiter).most_common(1)[0][1] == 1  # the waiter sent no call twice
    assert not set(by_waiter) & set(answered_before)  # what the holder finished was not paid again
    assert set(in_flight) <= set(by_waiter)  # what it had in flight was taken over
    assert len(set(by_waiter) | set(answered_before)) == 96 == Store.open(store).count_calls("ok")
    assert json.loads((tmp_path / "B.json").read_text())["best"] in "abcd"


def test_a_dead_owners_claim_is_taken_over_without_waiting_out_its_lease(tmp_path):
    """A rerun after a kill finds the killed process's claims: a dead owner on this machine (its pid
    gone, or reused by a process with another start time) is released at once; a live one is waited for."""
    import asyncio

    from veriscale.engine.call_leases import lease_owner
    from veriscale.engine.call_claims import CallClaims

    async def io(fn, *args, **kwargs):
        return fn(*args, **kwargs)

    store = Store.open(tmp_path / "s.sqlite3")
    dead = subprocess.run([sys.executable, "-c", "from veriscale.engine.call_leases import lease_owner; "
                           "print(lease_owner())"], capture_output=True, text=True, check=True).stdout.strip()
    assert store.claim_call("k", dead, lease_s=3600) == "mine"  # an hour-long lease of a process that exited
    claims = CallClaims(store, io, lease_s=30)
    assert asyncio.run(claims.claim("k"))[0] == "held"
    asyncio.run(asyncio.wait_for(claims.wait_unclaimed("k"), 300))  # without the check: an hour
    state, owner = asyncio.run(claims.claim("k"))
    assert state == "mine" and owner is not None and store.lease("k")["owner"] == owner

    live = lease_owner()  # this very process: alive, so its claim is waited for
    assert store.claim_call("k2", live, lease_s=3600) == "mine"
    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(asyncio.wait_for(claims.wait_unclaimed("k2"), 1.0))
    assert store.lease("k2")["owner"] == live
    store.close()
