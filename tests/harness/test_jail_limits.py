"""Every jail limit, exceeded on purpose: the session is stopped or refused, the host is unharmed.

Limits are set small here so each test is quick; the defaults are in
``veriscale.harness.jail.limits.JailLimits`` and docs/HARNESS.md.
"""

from __future__ import annotations

import os
import select
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.harness.jail_probe import probe, session_spec
from tests.harness.test_jail import marked_alive, marked_sleepers
from veriscale.harness.jail.sandbox import JailLimits, check_jail_available, run_jailed
from veriscale.harness.jail.limits import MIB, ResourceBox, expected_mechanism
from veriscale.sizes import parse_size
from veriscale.harness.jail.netjail import ModelForward
from veriscale.errors import UserError


@pytest.fixture(scope="module", autouse=True)
def jail_available() -> None:
    check_jail_available()


def small(**overrides: int) -> JailLimits:
    values = {"memory_bytes": 256 * MIB, "pids": 64, "cpu_s": 60, "tmpfs_bytes": 4 * MIB,
              "output_bytes": 4 * MIB, "capture_bytes": 64 * 1024}
    values.update(overrides)
    return JailLimits(**values)


def py(spec, code: str, timeout_s: float = 60):
    return run_jailed(spec, [sys.executable, "-c", code], timeout_s=timeout_s)


def test_limits_report_what_enforces_them() -> None:
    with ResourceBox(JailLimits()) as box:
        line = box.describe()
    assert box.kind in ("cgroup v1", "cgroup v2", "rlimits")
    assert f"via {box.kind}" in line and "2048 MiB" in line and "256 processes" in line
    assert expected_mechanism() == box.kind  # the run log's up-front line, found without a cgroup
    if os.geteuid() == 0 and Path("/sys/fs/cgroup/memory").is_dir() and os.access("/sys/fs/cgroup/memory", os.W_OK):
        assert box.kind == "cgroup v1"  # these machines: root with writable cgroup v1


def test_memory_limit_stops_the_session(layout: dict[str, Path]) -> None:
    spec = session_spec(layout, limits=small(memory_bytes=96 * MIB))
    result = py(spec, "b = bytearray(400 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('survived')")
    assert "survived" not in result.stdout
    if result.limits_via.startswith("cgroup"):
        assert result.limit == "memory" and result.returncode != 0
    else:  # RLIMIT_AS: the allocation itself fails
        assert "MemoryError" in result.stderr
    assert bytearray(1 << 20)  # the host can still allocate


def test_process_limit_bounds_a_fork_bomb(layout: dict[str, Path]) -> None:
    spec = session_spec(layout, limits=small(pids=24))
    # Each child blocks on a pipe until the parent exits (not for a fixed time): all stay alive while it forks.
    code = """
import os
r, w = os.pipe()
made = 0
for _ in range(200):
    try:
        pid = os.fork()
    except OSError as exc:
        print("refused", exc.errno); break
    if pid == 0:
        os.close(w); os.read(r, 1); os._exit(0)
    made += 1
print("made", made)
"""
    result = py(spec, code)
    made = int(result.stdout.split("made")[1].split()[0])
    assert "refused" in result.stdout and made < 24
    assert os.fork is not None and threading.active_count() >= 1  # host unaffected


def _barrier(server: socket.socket, parties: int) -> None:
    """Accept ``parties`` connections, then answer each: every session has arrived before any goes on."""
    arrived = []
    try:
        for _ in range(parties):
            conn, _ = server.accept()
            arrived.append(conn)
        for conn in arrived:
            conn.sendall(b"go")
    except OSError:
        pass
    finally:
        for conn in arrived:
            conn.close()


def test_concurrent_sessions_have_their_own_process_budgets(layout: dict[str, Path], tmp_path: Path) -> None:
    # Each session forks 16 children that stay alive (blocked on a pipe until it exits), then meets the
    # other at a barrier on the host (through its model relay): both hold 16 at the same moment.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    barrier = threading.Thread(target=_barrier, args=(server, 2), daemon=True)
    barrier.start()
    other = dict(layout, out=layout["task"] / "sessions" / "s2")
    specs = [session_spec(layout, limits=small(pids=24), model_endpoint=server.getsockname()),
             session_spec(other, limits=small(pids=24), model_endpoint=server.getsockname())]
    port = int(specs[0].model_url().rsplit(":", 1)[1])  # type: ignore[union-attr]
    code = f"""
import os, socket
r, w = os.pipe()
made = 0
for _ in range(16):
    pid = os.fork()
    if pid == 0:
        os.close(w); os.read(r, 1); os._exit(0)
    made += 1
print("made", made)
s = socket.create_connection(("127.0.0.1", {port}), timeout=50)  # the timeout is a hang guard only
print("together" if s.recv(2) == b"go" else "alone", made)
"""
    try:
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda s: py(s, code), specs))
    finally:
        server.close()
    for result in results:
        assert result.returncode == 0, result.stderr
        assert "made 16" in result.stdout  # 32 together: more than one budget of 24
        assert "together 16" in result.stdout  # both sessions held their 16 at the same time


@pytest.mark.parametrize("where", ["/tmp", "/var/tmp", "/dev/shm", "HOME"])
def test_scratch_tmpfs_is_size_capped(layout: dict[str, Path], where: str) -> None:
    folder = "os.environ['HOME']" if where == "HOME" else repr(where)
    results = probe(session_spec(layout, limits=small(tmpfs_bytes=2 * MIB)), f"""
        def fill():
            with open(os.path.join({folder}, "fill.bin"), "wb") as handle:
                handle.write(b"x" * (3 << 20))
        attempt("fill", fill)
        """)
    assert results["fill"] == "ENOSPC"


def test_output_folder_is_size_capped_and_the_host_copy_stays_under_it(layout: dict[str, Path]) -> None:
    results = probe(session_spec(layout, limits=small(output_bytes=2 * MIB)), """
        def fill(name, size):
            with open(name, "wb") as handle:
                handle.write(b"x" * size)
        attempt("small", lambda: fill("small.bin", 1 << 20))
        attempt("fill", lambda: fill("big.bin", 3 << 20))
        """)
    assert results["small"] == "ok" and results["fill"] in ("ENOSPC", "EFBIG")
    total = sum(p.stat().st_size for p in layout["out"].rglob("*") if p.is_file())
    assert (layout["out"] / "small.bin").stat().st_size == 1 << 20 and total <= 2 * MIB


def test_captured_output_keeps_head_and_tail_within_the_cap(layout: dict[str, Path]) -> None:
    spec = session_spec(layout, limits=small(capture_bytes=64 * 1024))
    code = "import sys\nsys.stdout.write('HEAD\\n' + 'x' * (20 << 20) + '\\nTAIL\\n')"
    result = py(spec, code)
    assert result.returncode == 0
    assert result.stdout.startswith("HEAD") and result.stdout.rstrip().endswith("TAIL")
    assert len(result.stdout) < 64 * 1024 + 200
    assert result.stdout_cut_bytes > (20 << 20) - 64 * 1024 - 100 and "bytes cut" in result.stdout


def test_cpu_time_limit_kills_a_busy_loop(layout: dict[str, Path]) -> None:
    spec = session_spec(layout, limits=small(cpu_s=1))
    # The 60 s timeout is only a hang guard (60 times the 1 s CPU budget): ended by the CPU limit means
    # killed by SIGKILL / SIGXCPU and not flagged timed out; a broken CPU limit runs into the timeout.
    result = py(spec, "while True: pass", timeout_s=60)
    assert result.returncode in (128 + 9, 128 + 24) and not result.timed_out  # SIGKILL / SIGXCPU
    assert result.limit != "time"


def test_wall_time_stops_the_session_and_reports_it(layout: dict[str, Path]) -> None:
    marker, script = marked_sleepers()  # 60 s sleeps: only the hang guard
    result = run_jailed(session_spec(layout, limits=small()), ["/bin/sh", "-c", script], timeout_s=1)
    assert result.timed_out and result.limit == "time"
    assert "woke" not in result.stdout and marked_alive(marker) == []  # stopped, not left to finish


def _threads() -> int:
    return threading.active_count()


def test_relay_caps_open_connections_so_host_threads_stay_bounded(tmp_path: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(512)
    before = _threads()
    clients = []
    with ModelForward(server.getsockname(), max_connections=4) as forward:
        for _ in range(150):
            client = socket.socket(socket.AF_UNIX)
            client.connect(str(forward.socket_path))
            clients.append(client)
        # Wait until the forward has dealt with every arrival: all but the 4 it relays are closed
        # (the deadline is only a hang guard); then count the threads it keeps.
        open_ = set(clients)
        deadline = time.monotonic() + 60
        while len(open_) > 4 and time.monotonic() < deadline:
            ready, _, _ = select.select(list(open_), [], [], 0.5)
            for client in ready:
                try:
                    if client.recv(1) == b"":
                        open_.discard(client)
                except OSError:
                    open_.discard(client)
        during = _threads()
        closed = len(clients) - len(open_)
    for client in clients:
        client.close()
    server.close()
    assert during - before <= 2 * 4 + 2  # accept thread + two pumps per open relay
    assert closed >= 140  # the rest were closed on arrival


def test_relay_cap_holds_against_a_session_inside_the_jail(layout: dict[str, Path]) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(512)
    before = _threads()
    peak = [0]
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _threads())
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    spec = session_spec(layout, model_endpoint=server.getsockname(), limits=small(relay_connections=4))
    port = int(spec.model_url().rsplit(":", 1)[1])  # type: ignore[union-attr]
    code = f"""
import select, socket, time
held = []
for _ in range(150):
    s = socket.socket(); s.connect(("127.0.0.1", {port})); held.append(s)
# Hold every connection until the relay has dealt with each (all but the 4 it relays are closed);
# the deadline is only a hang guard. The host watcher samples its threads meanwhile.
open_, deadline = set(held), time.monotonic() + 40
while len(open_) > 4 and time.monotonic() < deadline:
    ready, _, _ = select.select(list(open_), [], [], 0.5)
    for s in ready:
        try:
            gone = s.recv(1) == b""
        except OSError:
            gone = True
        if gone:
            open_.discard(s)
print("opened", len(held), "closed", len(held) - len(open_))
"""
    try:
        result = py(spec, code)
    finally:
        stop.set()
        watcher.join()
        server.close()
    assert "opened 150" in result.stdout, result.stderr
    assert int(result.stdout.split("closed")[1].split()[0]) >= 140, result.stdout  # the rest closed on arrival
    # watcher + stdout/stderr capture + harvest reader + two accept loops (the forward's socket and
    # the jail's connection broker) + two pumps per open relay
    assert peak[0] - before <= 6 + 2 * 4


@pytest.mark.parametrize("text, expected", [("512M", 512 * MIB), ("2G", 2 << 30), ("1024", 1024), ("1.5K", 1536)])
def test_sizes_parse(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["lots", "-1M", ""])
def test_bad_sizes_and_limits_are_user_errors(bad: str) -> None:
    with pytest.raises(UserError, match="not a size"):
        parse_size(bad)
    with pytest.raises(UserError, match="positive whole number"):
        JailLimits(pids=0)
