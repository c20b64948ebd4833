"""Further escape and host-abuse attempts, as a hostile session would make them.

Links, FIFOs and special files, names with control characters, sparse giants, races between
the session writing and the host reading, syscalls a verifier never needs, concurrent sessions
reading each other, a session that kills its own launcher, the relay's header rewrite. Each
test checks the host afterwards, not only what the session could read.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.harness.jail_probe import failed, probe, session_spec
from veriscale.harness.jail.sandbox import JailLimits, check_jail_available, run_jailed
from veriscale.harness.jail.limits import MIB
from veriscale.harness.jail.relay_gate import RelayPolicy
from veriscale.harness.protocol.session_records import read_record
from veriscale.harness.sessions.tools import ToolBox


@pytest.fixture(scope="module", autouse=True)
def jail_available() -> None:
    check_jail_available()


def sh(spec, script: str, timeout_s: float = 30):
    return run_jailed(spec, ["/bin/sh", "-c", script], timeout_s=timeout_s)


def in_thread(fn, guard_s: float = 60.0):
    """Run ``fn`` in a daemon thread: a host reader that blocks (a FIFO) fails the test, not CI.

    The assertion is that ``fn`` returns at all (a FIFO read would block forever); ``guard_s`` is only
    the last-resort hang guard, far past the milliseconds a refused read takes.
    """
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the test below
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(guard_s)
    assert not thread.is_alive(), "the host reader blocked (hang guard)"
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]


# --- what the host does with planted files -----------------------------------------------------


def test_a_fifo_planted_as_a_record_neither_blocks_nor_reaches_the_host(layout: dict[str, Path]) -> None:
    result = sh(session_spec(layout), "mkfifo ledger.json; mkfifo notes.txt; echo planted")
    assert "planted" in result.stdout
    assert not (layout["out"] / "ledger.json").exists()  # the harvest keeps regular files only
    os.mkfifo(layout["out"] / "ledger.json")  # as if one had reached the host anyway
    _, problems = in_thread(lambda: read_record(layout["out"] / "ledger.json", "resolver"))
    assert "was not written" in problems[0]
    box = ToolBox(task_dir=layout["task"], output_dir=layout["out"])
    reply = in_thread(lambda: box.call("read", {"path": str(layout["out"] / "ledger.json")}))
    assert reply.is_error and "FIFO" in reply.text
    grep = in_thread(lambda: box.call("grep", {"pattern": "x", "path": str(layout["out"])}))
    assert not grep.is_error


def test_links_planted_on_the_host_copy_are_never_followed_by_the_tools(layout: dict[str, Path]) -> None:
    layout["out"].mkdir(parents=True, exist_ok=True)
    (layout["out"] / "answers").symlink_to(layout["answers"])
    (layout["out"] / "up").symlink_to(layout["task"].parent)
    box = ToolBox(task_dir=layout["task"], output_dir=layout["out"])
    texts = [box.call("read", {"path": str(layout["out"] / "answers")}).text,
             box.call("grep", {"pattern": "ANSWER", "path": str(layout["out"])}).text,
             box.call("ls", {"path": str(layout["out"] / "up")}).text,
             box.call("find", {"pattern": "*.json", "path": str(layout["out"])}).text,
             box.call("read", {"path": str(layout["out"] / "up" / "t1.scores.json")}).text]
    assert not any("ANSWER-KEY" in t or "ARCHIVED" in t for t in texts), texts
    write = box.call("write", {"path": "answers", "content": "overwritten"})
    assert layout["answers"].read_text().startswith("ANSWER-KEY")  # the link was replaced, not written through
    assert not write.is_error and not (layout["out"] / "answers").is_symlink()
    via_link = box.call("write", {"path": "up/t1.scores.json", "content": "x"})
    assert via_link.is_error and "link" in via_link.text


def test_names_with_control_characters_are_left_out_and_never_printed_raw(layout: dict[str, Path]) -> None:
    result = probe(session_spec(layout), r"""
        for name in ("evil\x1b[2Jname.txt", "line\nbreak.txt", "bell\x07.txt", "ok.txt"):
            attempt(repr(name), lambda n=name: open(n, "w").close())
        """)
    assert all(v == "ok" for v in result.values())
    names = sorted(p.name for p in layout["out"].iterdir())
    assert names == ["ok.txt"]
    box = ToolBox(task_dir=layout["task"], output_dir=layout["out"])
    (layout["out"] / "host\x1bname").write_text("x")  # a host-side file with one: shown escaped
    listing = box.call("ls", {"path": str(layout["out"])}).text
    assert "\x1b" not in listing and "\\x1b" in listing


def test_sparse_giants_are_refused(layout: dict[str, Path]) -> None:
    results = probe(session_spec(layout, limits=JailLimits(output_bytes=8 * MIB, tmpfs_bytes=8 * MIB)), """
        def sparse(path):
            with open(path, "wb") as handle:
                handle.truncate(100 << 30)
        attempt("output", lambda: sparse("giant.bin"))
        attempt("tmp", lambda: sparse("/tmp/giant.bin"))
        """)
    assert results["output"] == "EFBIG" and results["tmp"] == "EFBIG"
    assert not (layout["out"] / "giant.bin").exists() or (layout["out"] / "giant.bin").stat().st_size <= 8 * MIB


def test_a_background_writer_cannot_race_the_harvest_or_outlive_the_session(layout: dict[str, Path]) -> None:
    marker = f"veriscale-late-{os.getpid()}"
    # The sleeper says so if it ever wakes (30 s: only the hang guard); the late writer carries the marker too.
    sleeper = f"{sys.executable} -c 'import time; time.sleep(30); print(\"sleeper woke\")' {marker}"
    late = f"sh -c 'sleep 0.5; echo late > late.txt' {marker}-writer"
    # control: the sleeper really starts (waited for, not slept on; the 200 polls are only a hang guard)
    seen_inside = sh(session_spec(layout), f"{sleeper} & for i in $(seq 200); do "
                                           f"ps ax -o args | grep -v grep | grep -q {marker} && break; sleep 0.05; done; "
                                           f"ps ax -o args | grep -v grep | grep -c {marker}")
    assert int(seen_inside.stdout.split()[-1]) >= 1, seen_inside.stdout
    result = sh(session_spec(layout), f"{sleeper} & {late} & echo early > early.txt; exit 0")
    assert result.returncode == 0 and "sleeper woke" not in result.stdout  # it did not wait for the sleeper
    assert (layout["out"] / "early.txt").read_text() == "early\n"
    # Neither background process outlived the session, so nothing can write late.txt from now on.
    alive = [p for p in Path("/proc").iterdir() if p.name.isdigit() and marker.encode() in _cmdline(p)]
    assert alive == []
    assert not (layout["out"] / "late.txt").exists()


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


def test_a_session_that_kills_its_launcher_keeps_the_host_copy_as_it_was(layout: dict[str, Path]) -> None:
    first = sh(session_spec(layout), "echo kept > kept.txt")
    assert first.harvest is not None and first.harvest.ok
    result = sh(session_spec(layout), "echo replaced > kept.txt; echo new > new.txt; kill -9 $PPID; sleep 5")
    assert result.harvest is not None and not result.harvest.ok
    assert "not kept" in result.stderr
    assert (layout["out"] / "kept.txt").read_text() == "kept\n" and not (layout["out"] / "new.txt").exists()


# --- system calls a verifier never needs ------------------------------------------------------


def test_namespace_mount_trace_and_kernel_calls_are_denied(layout: dict[str, Path]) -> None:
    results = probe(session_spec(layout), """
        import ctypes.util
        def call(name, *args):
            syscall_result(getattr(libc, name)(*args))
        attempt("unshare user", lambda: call("unshare", 0x10000000))
        attempt("unshare mount", lambda: call("unshare", 0x00020000))
        attempt("mount tmpfs", lambda: call("mount", b"none", b"/tmp", b"tmpfs", 0, None))
        attempt("ptrace pid 1", lambda: syscall_result(libc.ptrace(16, 1, 0, 0)))
        attempt("keyctl", lambda: syscall_result(libc.syscall(250, 0, 0, 0, 0, 0)))
        attempt("io_uring_setup", lambda: syscall_result(libc.syscall(425, 1, 0)))
        attempt("bpf", lambda: syscall_result(libc.syscall(321, 0, 0, 0)))
        attempt("perf_event_open", lambda: syscall_result(libc.syscall(298, 0, 0, -1, -1, 0)))
        attempt("mknod device", lambda: os.mknod("/tmp/mem", 0o600 | 0o020000, os.makedev(1, 1)))
        attempt("chmod setuid", lambda: (open("/tmp/f", "w").close(), os.chmod("/tmp/f", 0o4755)))
        attempt("chmod setgid dir", lambda: (os.mkdir("/tmp/d"), os.chmod("/tmp/d", 0o2775)))
        attempt("fork", lambda: os.waitpid(os.fork() or 0, 0) if True else None)
        """)
    for name in ("unshare user", "unshare mount", "mount tmpfs", "ptrace pid 1", "keyctl", "io_uring_setup",
                 "bpf", "perf_event_open", "mknod device", "chmod setuid", "chmod setgid dir"):
        assert failed(results[name]), (name, results[name])
    assert results["unshare user"] == "EPERM" and results["chmod setuid"] == "EPERM"


def test_nested_sandboxes_cannot_be_started(layout: dict[str, Path]) -> None:
    result = sh(session_spec(layout), "unshare -r true; echo rc=$?; bwrap --ro-bind / / true; echo rc=$?")
    assert "rc=0" not in result.stdout, result.stdout + result.stderr


def test_root_and_dev_are_read_only_and_the_seed_is_untouchable(layout: dict[str, Path]) -> None:
    results = probe(session_spec(layout), """
        attempt("write /", lambda: open("/evil", "w").write("x"))
        attempt("write /dev", lambda: open("/dev/evil", "w").write("x"))
        attempt("write seed", lambda: open("/.veriscale/seed/x", "w").write("x"))
        attempt("replace launcher", lambda: open("/.veriscale/inside.py", "w").write("x"))
        attempt("dev null", lambda: open("/dev/null", "w").write("x"))
        """)
    for name in ("write /", "write /dev", "write seed", "replace launcher"):
        assert failed(results[name]), (name, results[name])
    assert not failed(results["dev null"])


def test_terminal_injection_and_proc_root_escapes_fail(layout: dict[str, Path]) -> None:
    results = probe(session_spec(layout), """
        import fcntl, termios
        attempt("tiocsti", lambda: fcntl.ioctl(0, termios.TIOCSTI, b"x"))
        attempt("proc 1 root", lambda: os.listdir("/proc/1/root/"))
        attempt("host pid 1 environ", lambda: read("/proc/1/environ"))
        """)
    assert failed(results["tiocsti"])
    assert failed(results["proc 1 root"]) or "tasks" not in str(results["proc 1 root"])
    assert failed(results["host pid 1 environ"]) or "VERISCALE" not in str(results["host pid 1 environ"])


def test_host_abstract_sockets_are_unreachable(layout: dict[str, Path]) -> None:
    name = f"\0veriscale-test-{os.getpid()}"
    server = socket.socket(socket.AF_UNIX)
    server.bind(name)
    server.listen(1)
    try:
        probe_client = socket.socket(socket.AF_UNIX)
        probe_client.connect(name)  # control: reachable on the host
        probe_client.close()
        results = probe(session_spec(layout), f"""
            def connect():
                s = socket.socket(socket.AF_UNIX); s.connect({name!r})
            attempt("abstract", connect)
            """)
    finally:
        server.close()
    assert failed(results["abstract"])


# --- concurrent sessions --------------------------------------------------------------------


def test_concurrent_sessions_cannot_read_each_others_folders(layout: dict[str, Path], tmp_path: Path) -> None:
    runs = tmp_path / "t1.runs" / "x" / "sessions"
    resolve, challenge = runs / "resolve", runs / "challenge"
    secret = "RESOLVER-NOTES-3b1f"
    spec_a = session_spec(layout, writable_dir=resolve, hidden=[])
    spec_b = session_spec(layout, writable_dir=challenge, hidden=[])
    script_a = f"echo {secret} > notes.md; sleep 2"
    script_b = (f"sleep 0.5; cat {resolve}/notes.md; ls {resolve}; ls {runs}; "
                "for p in /proc/[0-9]*; do cat $p/cmdline 2>/dev/null; echo; done")
    with ThreadPoolExecutor(2) as pool:
        a = pool.submit(sh, spec_a, script_a)
        b = pool.submit(sh, spec_b, script_b)
        result_a, result_b = a.result(), b.result()
    assert result_a.returncode == 0 and (resolve / "notes.md").read_text().strip() == secret
    assert secret not in result_b.stdout and "sleep 2" not in result_b.stdout


# --- the relay --------------------------------------------------------------------------------


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[dict[str, str]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        length = int(self.headers.get("Content-Length", 0))
        body = self.rfile.read(length)
        type(self).seen.append({"auth": self.headers.get("Authorization", ""), "body": body.decode()})
        payload = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


def test_the_api_key_reaches_the_endpoint_through_the_relay_only(layout: dict[str, Path]) -> None:
    key = "sk-host-only-77aa"
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Recorder.seen = []
    spec = session_spec(layout, model_endpoint=server.server_address, model_headers={"Authorization": f"Bearer {key}"},
                        model_policy=RelayPolicy.for_api("/v1", "m"))
    code = f"""
import json, os, socket, subprocess, urllib.request
req = urllib.request.Request(os.environ["VERISCALE_MODEL_URL"] + "/v1/chat/completions", data=b'{{"model": "m", "x": 1}}',
                             headers={{"Authorization": "Bearer session-forged", "Content-Type": "application/json"}})
print(urllib.request.urlopen(req, timeout=10).read().decode())
port = int(os.environ["VERISCALE_MODEL_URL"].rsplit(":", 1)[1])
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(b"GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\\r\\nHost: 169.254.169.254\\r\\n\\r\\n")
print("metadata:", s.recv(4096).split(b"\\r\\n", 1)[0].decode())
found = subprocess.run(["grep", "-rsI", "{key}", "/tmp", "/run", os.environ["HOME"], "/.veriscale", "."],
                       capture_output=True, text=True).stdout
print("env has key:", any("{key}" in v for v in os.environ.values()), "files with key:", repr(found))
"""
    try:
        # HOME can hold a whole Python install (torch, ray: GBs): grep skips binary files (-I), where
        # no host code writes a key, and gets time to read every text file there.
        result = run_jailed(spec, [sys.executable, "-c", code], timeout_s=120)
    finally:
        server.shutdown()
    assert '{"ok": true}' in result.stdout, result.stderr
    assert "env has key: False" in result.stdout and "files with key: ''" in result.stdout
    assert "metadata: HTTP/1.1 403 Forbidden" in result.stdout, result.stdout + result.stderr
    assert _Recorder.seen == [{"auth": f"Bearer {key}", "body": '{"model": "m", "x": 1}'}]


def test_an_oversized_request_head_is_refused(layout: dict[str, Path]) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Recorder.seen = []
    spec = session_spec(layout, model_endpoint=server.server_address, model_headers={"Authorization": "Bearer k"},
                        model_policy=RelayPolicy.for_api("/v1", "m"))
    port = int(spec.model_url().rsplit(":", 1)[1])  # type: ignore[union-attr]
    code = f"""
import socket
s = socket.create_connection(("127.0.0.1", {port}))
s.sendall(b"POST / HTTP/1.1\\r\\nX: " + b"a" * (200 * 1024))
s.settimeout(10)
print("reply", s.recv(100).split(b"\\r\\n")[0].decode())
"""
    try:
        result = run_jailed(spec, [sys.executable, "-c", code], timeout_s=30)
    finally:
        server.shutdown()
    assert "reply HTTP/1.1 403 Forbidden" in result.stdout, result.stdout + result.stderr
    assert _Recorder.seen == []


# --- root callers ----------------------------------------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0, reason="a folder below a root-owned 0700 directory needs a root caller")
def test_a_task_below_a_root_only_folder_works_for_a_root_caller(tmp_path: Path) -> None:
    import tempfile

    from veriscale.harness.jail.sandbox import JailSpec

    private = Path(tempfile.mkdtemp(prefix="veriscale-private-", dir="/root"))
    try:
        os.chmod(private, 0o700)
        task = private / "tasks" / "t1"
        (task / "spec").mkdir(parents=True)
        (task / "spec" / "task.md").write_text("Sum the column.\n")
        out = private / "tasks" / "t1.runs" / "x" / "sessions" / "resolve"
        result = run_jailed(JailSpec(task_dir=task, writable_dir=out),
                            ["/bin/sh", "-c", f"cat {task}/spec/task.md; echo done > ledger.json; id -u"], timeout_s=30)
        assert result.returncode == 0, result.stderr
        assert "Sum the column." in result.stdout and int(result.stdout.split()[-1]) != 0
        assert json.loads(json.dumps((out / "ledger.json").read_text())) == "done\n"
    finally:
        import shutil

        shutil.rmtree(private)


class _UsageServer(http.server.BaseHTTPRequestHandler):
    """Answers like a chat endpoint: a JSON body with usage, or server-sent events ending in usage."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.endswith("/stream"):
            events = (b'data: {"choices": [{"delta": {"content": "hi"}}]}\n\n'
                      b'data: {"choices": [], "usage": {"prompt_tokens": 21, "completion_tokens": 4}}\n\ndata: [DONE]\n\n')
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(events), events))
            return
        payload = json.dumps({"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 3,
                                                       "prompt_tokens_details": {"cached_tokens": 8}}}).encode()
        self.send_response(200 if self.path.endswith("/completions") else 404)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


def test_an_external_agents_calls_through_the_relay_are_recorded_in_the_store(layout: dict[str, Path],
                                                                               tmp_path: Path) -> None:
    from veriscale.engine.store import Store
    from veriscale.harness.jail.relay_record import RelayRecorder

    store = Store.open(tmp_path / "store.sqlite3")
    run = store.start_run("harness task", "m", {})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _UsageServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    recorder = RelayRecorder(store, run_id=run, model="http://127.0.0.1/v1#m", label="resolve")
    policy = RelayPolicy(model="m", paths=("/v1/chat/completions", "/v1/stream", "/v1/missing"))
    spec = session_spec(layout, model_endpoint=server.server_address, model_tap=recorder.tap, model_policy=policy)
    code = """
import os, urllib.request, urllib.error
base = os.environ["VERISCALE_MODEL_URL"]
for path in ("/v1/chat/completions", "/v1/stream", "/v1/missing"):
    req = urllib.request.Request(base + path, data=b'{"model": "m", "messages": []}', headers={"Content-Type": "application/json"})
    try:
        urllib.request.urlopen(req, timeout=10).read()
    except urllib.error.HTTPError as exc:
        print("status", exc.code)
"""
    try:
        result = run_jailed(spec, [sys.executable, "-c", code], timeout_s=30)
    finally:
        server.shutdown()
    assert "status 404" in result.stdout, result.stderr
    deadline = time.monotonic() + 60  # the relay thread commits as the connection closes: wait for it (hang guard)
    while len(store.run_calls(run)) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    calls = store.run_calls(run)
    assert [(c["kind"], c["status"], c["label"]) for c in calls] == [("relay", "ok", "resolve")] * 2 + [("relay", "failed", "resolve")]
    assert [(c["prompt_tokens"], c["cached_tokens"], c["completion_tokens"]) for c in calls[:2]] == [(11, 8, 3), (21, 0, 4)]
    cost = store.run_cost(run)  # the 404 reported usage too: what the server counted is what was spent
    assert cost["calls"] == 3 and cost["failed"] == 1 and cost["prompt_tokens"] == 11 + 21 + 11
