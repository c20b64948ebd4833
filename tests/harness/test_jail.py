"""Escape attempts against the session jail: every one is really run inside and must fail.

Each test also checks a control on the host (the secret, socket, server or process exists and
is reachable there), so a passing test means the jail stopped the attack, not that the target
was missing. CI runs these as root: the jail must confine root too.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.jail_probe import (
    ANSWER, ARCHIVED, EVIDENCE, OTHER_NOTES, TASK_TEXT, failed, probe, session_spec,
)
from veriscale.errors import UserError
from veriscale.harness.jail import sandbox as jail
from veriscale.harness.jail.sandbox import (
    INSIDE_UID,
    JAIL_OFF_MESSAGE,
    JailResult,
    check_jail_available,
    run_jailed,
)
from veriscale.harness.jail.limits import JAIL_UID_BASE, JAIL_UID_SLOTS


@pytest.fixture(scope="module", autouse=True)
def jail_available() -> None:
    check_jail_available()


# --- what a session can do ----------------------------------------------------------------


def test_session_reads_its_task_and_writes_only_its_output_folder(layout: dict[str, Path]) -> None:
    spec = session_spec(layout)
    scratch = f"/tmp/veriscale-jail-scratch-{os.getpid()}"
    results = probe(
        spec,
        f"""
        attempt("read spec", lambda: read({str(layout['task'] / 'spec' / 'task.md')!r}))
        attempt("read evidence", lambda: read({str(layout['report'])!r}))
        attempt("write output", lambda: open("verdict.md", "w").write("pick r01"))
        attempt("write tmp", lambda: open({scratch!r}, "w").write("x"))
        attempt("home entries", lambda: sorted(os.listdir(os.environ["HOME"])))
        attempt("cwd", lambda: os.getcwd())
        """,
    )
    assert results["read spec"] == ["ok", TASK_TEXT]
    assert results["read evidence"] == ["ok", EVIDENCE]
    assert results["write output"] == ["ok", 8]
    assert results["cwd"] == ["ok", str(layout["out"].resolve())]
    assert (layout["out"] / "verdict.md").read_text() == "pick r01"
    # /tmp is a private scratch tmpfs: the write succeeded inside and left nothing on the host.
    assert results["write tmp"] == ["ok", 1]
    assert not Path(scratch).exists()
    # $HOME is empty apart from the mount point of a Python install that lives under it.
    home = Path(os.path.expanduser("~")).resolve()
    interpreter_tops = {
        Path(p).resolve().relative_to(home).parts[0]
        for p in (sys.base_prefix, sys.prefix)
        if home in Path(p).resolve().parents
    }
    assert set(results["home entries"][1]) <= interpreter_tops  # type: ignore[index]
    assert any(entry not in interpreter_tops for entry in os.listdir(home))  # control


def test_returncode_stdout_and_stderr_are_captured(layout: dict[str, Path]) -> None:
    result = run_jailed(
        session_spec(layout), ["sh", "-c", "echo to-out; echo to-err >&2; exit 3"], timeout_s=20
    )
    assert (result.returncode, result.stdout, result.stderr, result.timed_out) == (
        3,
        "to-out\n",
        "to-err\n",
        False,
    )


def marked_sleepers() -> tuple[str, str]:
    """A command whose foreground and background sleeps carry a marker, and say so if they ever wake.

    Each would run 60 s (120 times the 0.5 s timeout: that is only the hang guard); the checks are on
    events: the run is flagged timed out, neither sleep ever woke, and no marked process is left.
    """
    marker = f"60.{os.getpid()}{threading.get_ident() % 1000}"
    return marker, f"(sleep {marker}; echo background-woke) & sleep {marker}; echo foreground-woke"


def marked_alive(marker: str) -> list[int]:
    """Host pids whose command line carries ``marker`` (a zombie's reads empty: it counts as gone)."""
    alive = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if marker.encode() in (proc / "cmdline").read_bytes():
                    alive.append(int(proc.name))
            except OSError:
                pass
    return alive


def test_timeout_kills_the_session_and_its_background_children(layout: dict[str, Path]) -> None:
    # The background sleep holds stdout open: the call only returns once it is dead too.
    marker, script = marked_sleepers()
    result = run_jailed(session_spec(layout), ["sh", "-c", script], timeout_s=0.5)
    assert result.timed_out
    assert "woke" not in result.stdout  # stopped by the timeout, not left to finish its sleeps
    assert marked_alive(marker) == []  # the background child is gone with the session


# --- answer keys, archives and other sessions ---------------------------------------------


def test_answer_keys_archives_and_other_sessions_are_unreadable(layout: dict[str, Path]) -> None:
    secrets = {"answers": ANSWER, "archive": ARCHIVED, "other_notes": OTHER_NOTES}
    for name, text in secrets.items():
        assert layout[name].read_text() == text  # control: they exist on the host
    results = probe(
        session_spec(layout),
        f"""
        for name, path in {({n: str(layout[n]) for n in secrets})!r}.items():
            attempt(name, lambda: read(path))
        attempt("list task parent", lambda: sorted(os.listdir({str(layout['task'].parent)!r})))
        attempt("list sessions", lambda: sorted(os.listdir({str(layout['task'] / 'sessions')!r})))
        """,
    )
    for name in secrets:
        assert failed(results[name]), (name, results[name])
    assert results["list task parent"] == ["ok", ["t1"]]
    assert results["list sessions"] == ["ok", ["s1"]]


def test_a_hidden_file_inside_the_task_reads_as_nothing(layout: dict[str, Path]) -> None:
    planted = layout["task"] / "workspace" / "expected_output.csv"
    planted.write_text(ANSWER)
    spec = session_spec(layout, hidden=[layout["task"] / "sessions", planted])
    results = probe(spec, f'attempt("planted", lambda: read({str(planted)!r}))')
    assert results["planted"] in ("EACCES", ["ok", ""])
    assert planted.read_text() == ANSWER  # control


def test_unmounting_the_hiding_tmpfs_fails(layout: dict[str, Path]) -> None:
    sessions = str(layout["task"] / "sessions")
    results = probe(
        session_spec(layout),
        f"""
        MNT_DETACH = 2
        for target in ({sessions!r}, "/tmp"):
            attempt("umount " + target, lambda: syscall_result(libc.umount2(target.encode(), MNT_DETACH)))
        # A nested user namespace would make the session root of its own namespace.
        CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
        attempt("unshare", lambda: syscall_result(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS)))
        attempt("umount after unshare", lambda: syscall_result(libc.umount2({sessions!r}.encode(), MNT_DETACH)))
        attempt("read other notes", lambda: read({str(layout['other_notes'])!r}))
        """,
    )
    assert results[f"umount {sessions}"] == "EPERM"
    assert results["umount /tmp"] == "EPERM"
    assert failed(results["unshare"])
    assert failed(results["umount after unshare"])
    assert failed(results["read other notes"])
    assert layout["other_notes"].read_text() == OTHER_NOTES  # control


def test_remounting_evidence_writable_fails(layout: dict[str, Path]) -> None:
    rollouts = str(layout["task"] / "rollouts")
    results = probe(
        session_spec(layout),
        f"""
        MS_RDONLY, MS_REMOUNT, MS_BIND = 1, 32, 4096
        attempt("remount rw", lambda: syscall_result(
            libc.mount(None, {rollouts!r}.encode(), None, MS_REMOUNT | MS_BIND, None)))
        attempt("bind over", lambda: syscall_result(
            libc.mount(b"/tmp", {rollouts!r}.encode(), None, MS_BIND, None)))
        attempt("write after", lambda: open({str(layout['report'])!r}, "w").write("forged"))
        """,
    )
    assert results["remount rw"] == "EPERM"
    assert results["bind over"] == "EPERM"
    assert results["write after"] == "EROFS"
    assert layout["report"].read_text() == EVIDENCE


def test_writing_into_rollouts_spec_and_workspace_fails(layout: dict[str, Path]) -> None:
    task = layout["task"]
    targets = {
        "overwrite report": str(layout["report"]),
        "new rollout file": str(task / "rollouts" / "r01" / "deliverables" / "extra.md"),
        "overwrite spec": str(task / "spec" / "task.md"),
        "new workspace file": str(task / "workspace" / "planted.csv"),
    }
    results = probe(
        session_spec(layout),
        f"""
        for name, path in {targets!r}.items():
            attempt(name, lambda: open(path, "w").write("forged"))
        attempt("delete report", lambda: os.unlink({str(layout['report'])!r}))
        attempt("rename spec", lambda: os.rename({str(task / 'spec' / 'task.md')!r}, "stolen.md"))
        attempt("chmod spec", lambda: os.chmod({str(task / 'spec' / 'task.md')!r}, 0o777))
        """,
    )
    for name in [*targets, "delete report", "chmod spec"]:
        assert results[name] == "EROFS", (name, results[name])
    assert results["rename spec"] in ("EROFS", "EXDEV")
    assert layout["report"].read_text() == EVIDENCE
    assert (task / "spec" / "task.md").read_text() == TASK_TEXT
    assert not (task / "workspace" / "planted.csv").exists()


def test_links_out_of_the_writable_folder_do_not_reach_hidden_files(
    layout: dict[str, Path],
) -> None:
    answers, report = str(layout["answers"]), str(layout["report"])
    results = probe(
        session_spec(layout),
        f"""
        os.symlink({answers!r}, "answers-link")
        attempt("read via symlink", lambda: read("answers-link"))
        os.symlink("/proc/1/root" + {answers!r}, "proc-root-link")
        attempt("read via /proc/1/root", lambda: read("proc-root-link"))
        attempt("hard link hidden", lambda: os.link({answers!r}, "answers-hard"))
        attempt("hard link evidence", lambda: os.link({report!r}, "report-hard"))
        """,
    )
    assert failed(results["read via symlink"])
    assert failed(results["read via /proc/1/root"])
    assert results["hard link hidden"] == "ENOENT"
    assert results["hard link evidence"] == "EXDEV"
    assert layout["answers"].read_text() == ANSWER  # control
    assert not (layout["out"] / "report-hard").exists()


def test_etc_shadow_is_blank_inside(layout: dict[str, Path]) -> None:
    assert os.stat("/etc/shadow").st_size > 0  # control
    results = probe(session_spec(layout), 'attempt("shadow", lambda: read("/etc/shadow"))')
    assert results["shadow"] in ("EACCES", ["ok", ""])


# --- container runtimes -------------------------------------------------------------------


@pytest.fixture()
def docker_socket() -> Iterator[str]:
    """/run/docker.sock: the real one when it exists, else a listening fake removed afterwards."""
    path = "/run/docker.sock"
    if os.path.exists(path):
        yield path
        return
    if not os.access("/run", os.W_OK):
        pytest.skip("no /run/docker.sock here and /run is not writable to plant a fake one (unprivileged run)")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(4)
    try:
        yield path
    finally:
        server.close()
        os.unlink(path)


def test_docker_socket_is_unreachable_even_when_run_is_bound(
    layout: dict[str, Path], docker_socket: str
) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as control:
        control.connect(docker_socket)  # control: the host reaches it
    connect = f"""
        def connect(path):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.connect(path)
        attempt("docker.sock", lambda: connect({docker_socket!r}))
        attempt("var run docker.sock", lambda: connect("/var/run/docker.sock"))
    """
    default = probe(session_spec(layout), connect)
    exposed = probe(session_spec(layout, readonly_extra=[Path("/run")]), connect)
    for results in (default, exposed):
        assert failed(results["docker.sock"]), results
        assert failed(results["var run docker.sock"]), results


def test_container_binaries_on_path_are_masked(layout: dict[str, Path], tmp_path: Path) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("docker", "podman", "my-tool"):
        script = tools / name
        script.write_text(f"#!/bin/sh\necho {name}-RAN\n")
        script.chmod(0o755)
    env = {"PATH": f"{tools}:/usr/bin:/bin"}
    control = subprocess.run(["docker"], env=env, capture_output=True, text=True)
    assert control.stdout == "docker-RAN\n"
    spec = session_spec(layout, readonly_extra=[tools], env=env)
    results = {
        name: run_jailed(spec, ["sh", "-c", name], timeout_s=20)
        for name in ("docker", "podman", "my-tool")
    }
    # The folder is visible; only the container runtimes in it are masked.
    assert results["my-tool"].stdout == "my-tool-RAN\n"
    for name in ("docker", "podman"):
        assert results[name].returncode != 0 and "RAN" not in results[name].stdout


# --- network ------------------------------------------------------------------------------


class _ModelHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server API)
        body = json.dumps({"model": "fake", "path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def model_server() -> Iterator[tuple[str, int]]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ModelHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield ("127.0.0.1", server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture()
def other_service() -> Iterator[int]:
    """Another loopback service on the host that answers every connection with a banner."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)

    def serve() -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            client.sendall(b"HOST-SERVICE")
            client.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield server.getsockname()[1]
    finally:
        server.shutdown(socket.SHUT_RDWR)
        server.close()


def test_only_the_model_endpoint_is_reachable(
    layout: dict[str, Path], model_server: tuple[str, int], other_service: int
) -> None:
    with socket.create_connection(("127.0.0.1", other_service)) as control:
        assert control.recv(64) == b"HOST-SERVICE"
    abstract_name = f"\0veriscale-jail-test-{os.getpid()}"
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind(abstract_name)
    abstract.listen(1)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as control:
        control.connect(abstract_name)  # control: abstract unix sockets are per network namespace
    spec = session_spec(layout, model_endpoint=model_server)
    url = spec.model_url()
    assert url == f"http://127.0.0.1:{model_server[1]}"
    results = probe(
        spec,
        f"""
        import urllib.request
        attempt("model", lambda: json.loads(urllib.request.urlopen({url!r} + "/v1/models", timeout=5).read()))
        attempt("model env", lambda: os.environ["VERISCALE_MODEL_URL"])
        def banner(port):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                return sock.recv(64).decode()
        attempt("other service", lambda: banner({other_service}))
        attempt("abstract unix", lambda: socket.socket(socket.AF_UNIX).connect({abstract_name!r}))
        """,
    )
    abstract.close()
    assert results["model"] == ["ok", {"model": "fake", "path": "/v1/models"}]
    assert results["model env"] == ["ok", url]
    assert results["other service"] == "ECONNREFUSED"
    assert results["abstract unix"] == "ECONNREFUSED"


def test_without_an_endpoint_the_session_has_no_network(
    layout: dict[str, Path], model_server: tuple[str, int]
) -> None:
    results = probe(
        session_spec(layout),
        f"""
        attempt("model port", lambda: socket.create_connection(("127.0.0.1", {model_server[1]}), timeout=5).close())
        """,
    )
    assert results["model port"] == "ECONNREFUSED"
    assert session_spec(layout).model_url() is None


# --- processes and privileges -------------------------------------------------------------


def test_host_processes_are_invisible_and_unsignalable(layout: dict[str, Path]) -> None:
    host = subprocess.Popen(["sleep", "37.25"])
    try:
        assert Path(f"/proc/{host.pid}").exists()  # control
        results = probe(
            session_spec(layout),
            f"""
            import signal
            attempt("pids", lambda: sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
            attempt("proc entry", lambda: read("/proc/{host.pid}/cmdline"))
            attempt("kill", lambda: os.kill({host.pid}, signal.SIGKILL))
            """,
        )
        ps = run_jailed(session_spec(layout), ["ps", "ax"], timeout_s=20)
        assert host.poll() is None  # still alive
    finally:
        host.kill()
        host.wait()
    assert len(results["pids"][1]) <= 3 and host.pid not in results["pids"][1]  # type: ignore[index]
    assert failed(results["proc entry"])
    assert results["kill"] == "ESRCH"
    assert ps.returncode == 0 and "37.25" not in ps.stdout


def test_session_has_no_capabilities_even_when_started_by_root(layout: dict[str, Path]) -> None:
    if os.geteuid() == 0:  # control: root on the host holds capabilities
        host_status = Path("/proc/self/status").read_text()
        assert "CapEff:\t0000000000000000" not in host_status
    results = probe(
        session_spec(layout),
        """
        status = dict(line.split(":\\t", 1) for line in read("/proc/self/status").splitlines() if ":\\t" in line)
        attempt("caps", lambda: {k: status[k].strip() for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh")})
        attempt("uid", lambda: os.getuid())
        attempt("setuid 0", lambda: os.setuid(0))
        attempt("no_new_privs", lambda: status["NoNewPrivs"].strip())
        """,
    )
    no_caps = {k: "0000000000000000" for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh")}
    assert results["caps"] == ["ok", no_caps]
    # A root caller's session runs as a host uid of its own; anyone else's as uid 1000 of a user namespace.
    expected = range(JAIL_UID_BASE, JAIL_UID_BASE + JAIL_UID_SLOTS) if os.geteuid() == 0 else [INSIDE_UID]
    assert results["uid"][0] == "ok" and results["uid"][1] in expected  # type: ignore[index]
    assert failed(results["setuid 0"])
    assert results["no_new_privs"] == ["ok", "1"]


# --- jail off, bad input, unavailable -----------------------------------------------------


def test_no_jail_runs_unconfined(layout: dict[str, Path]) -> None:
    assert "jail is off" in JAIL_OFF_MESSAGE
    spec = session_spec(layout, no_jail=True, model_endpoint=("127.0.0.1", 8000))
    result = run_jailed(spec, ["cat", str(layout["answers"])], timeout_s=20)
    assert isinstance(result, JailResult) and result.stdout == ANSWER
    assert spec.model_url() == "http://127.0.0.1:8000"


def test_no_jail_timeout_kills_the_process_group(layout: dict[str, Path]) -> None:
    spec = session_spec(layout, no_jail=True)
    marker, script = marked_sleepers()
    result = run_jailed(spec, ["sh", "-c", script], timeout_s=0.5)
    assert result.timed_out and "woke" not in result.stdout
    assert marked_alive(marker) == []  # the whole process group was killed, not only the shell


@pytest.mark.parametrize(
    "option, value, fragment",
    [
        ("writable_dir", "rollouts/r01", "inside the task's read-only 'rollouts/'"),
        ("writable_dir", "spec", "inside the task's read-only 'spec/'"),
        ("writable_dir", "..", "contains the task folder"),
        ("task_dir", "missing", "does not exist"),
        ("readonly_extra", ["missing-skills"], "does not exist"),
        ("model_endpoint", ("127.0.0.1", 0), "not in 1..65535"),
        ("model_endpoint", "localhost:8000", "not a (host, port) pair"),
        ("cwd", "/usr", "not visible in the jail"),
    ],
)
def test_bad_specs_are_user_errors(
    layout: dict[str, Path], option: str, value: object, fragment: str
) -> None:
    task = layout["task"]
    if option in ("writable_dir", "task_dir"):
        value = task / str(value)
    elif option == "readonly_extra":
        value = [task / name for name in value]  # type: ignore[attr-defined]
    with pytest.raises(UserError) as caught:
        session_spec(layout, **{option: value})
    assert fragment in str(caught.value)


@pytest.mark.parametrize("argv, timeout_s", [([], 10), ("ls -la", 10), (["ls"], 0)])
def test_bad_commands_are_user_errors(
    layout: dict[str, Path], argv: object, timeout_s: float
) -> None:
    with pytest.raises(UserError):
        run_jailed(session_spec(layout), argv, timeout_s=timeout_s)  # type: ignore[arg-type]


def test_missing_bubblewrap_is_a_user_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(jail, "_available", False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UserError, match="apt-get install bubblewrap"):
        check_jail_available()


def test_bwrap_that_cannot_create_namespaces_is_a_user_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A bwrap that fails the way it does where user namespaces are disabled.
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(jail, "_available", False)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    with pytest.raises(UserError, match="No permissions to creating new namespace"):
        check_jail_available()
