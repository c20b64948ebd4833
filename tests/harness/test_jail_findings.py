"""The seven findings of the hostile-session review (issue 7), one test each (or a few).

Every test runs a real attack from inside a real jail (or plants what a session could plant)
and then checks the host: what the host itself does with what the session left. CI runs this
file as root and again as an unprivileged user.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.harness.jail_probe import failed, probe, session_spec
from veriscale.harness.protocol.gate import copy_base, keep_base_files
from veriscale.harness.sessions.executors import PiExecutor, SessionSpec
from veriscale.harness.jail.sandbox import JailSpec, check_jail_available, run_jailed
from veriscale.harness.protocol.session_records import read_record
from veriscale.harness.sessions.tools import ToolBox

ARCHIVED = "ARCHIVED-SCORE-91c2"



@pytest.fixture(scope="module", autouse=True)
def jail_available() -> None:
    check_jail_available()


def _sh(spec: JailSpec, script: str) -> str:
    result = run_jailed(spec, ["/bin/sh", "-c", script], timeout_s=30)
    assert result.returncode == 0, result.stderr
    return result.stdout


# --- 1. root outside must not mean root-owned effects ------------------------------------------


def _host_uids_of(marker: str) -> set[int]:
    """Real uids, as the host sees them, of the processes whose last argument is ``marker``: the
    session's own command (bubblewrap, which sets the jail up, carries it inside its JSON argument)."""
    uids = set()
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and (proc / "cmdline").read_bytes().split(b"\0")[-2:-1] == [marker.encode()]:
                status = (proc / "status").read_text()
                uids.add(int(status.split("\nUid:\t", 1)[1].split()[0]))
        except (OSError, IndexError):
            continue
    return uids


def test_session_runs_as_an_unprivileged_host_identity(layout: dict[str, Path]) -> None:
    marker = f"veriscale-whoami-{os.getpid()}"
    seen: set[int] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.update(_host_uids_of(marker))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = run_jailed(session_spec(layout), [sys.executable, "-c", "import time; time.sleep(1.5)", marker],
                            timeout_s=30)
    finally:
        done.set()
        watcher.join()
    assert result.returncode == 0 and seen, result.stderr
    assert 0 not in seen  # seen from the host: no session process is root
    if os.geteuid() != 0:
        assert seen == {os.geteuid()}
    else:
        assert seen == {result.host_uid}


def test_global_sysctls_are_not_writable(layout: dict[str, Path]) -> None:
    current = Path("/proc/sys/kernel/core_pattern").read_text()  # control: readable on the host
    # Open for writing and write back the current value: a success changes nothing on the host.
    results = probe(session_spec(layout), f"""
        def write_back(path, value):
            with open(path, "w") as handle:
                handle.write(value)
        attempt("core_pattern", lambda: write_back("/proc/sys/kernel/core_pattern", {current!r}))
        attempt("hostname sysctl", lambda: write_back("/proc/sys/kernel/hostname", read("/proc/sys/kernel/hostname")))
        attempt("sysrq open", lambda: os.close(os.open("/proc/sysrq-trigger", os.O_WRONLY)))
        """)
    assert failed(results["core_pattern"])
    assert failed(results["hostname sysctl"])
    assert failed(results["sysrq open"])
    assert Path("/proc/sys/kernel/core_pattern").read_text() == current


def test_no_setuid_or_setgid_bit_reaches_the_host(layout: dict[str, Path]) -> None:
    _sh(session_spec(layout), "cp /bin/sh suid-sh; chmod 4755 suid-sh; cp /bin/sh sgid-sh; chmod 2755 sgid-sh;"
                              " mkdir sgid-dir; chmod 2775 sgid-dir; true")
    for path in layout["out"].rglob("*"):
        mode = path.lstat().st_mode
        assert not mode & (stat.S_ISUID | stat.S_ISGID), f"{path} kept {stat.filemode(mode)}"
        assert path.lstat().st_uid == os.geteuid() or os.geteuid() != 0


def test_etc_files_made_root_only_after_the_first_session_stay_blank(layout: dict[str, Path]) -> None:
    _sh(session_spec(layout), "true")  # the first session of this process
    if os.geteuid() != 0:
        target = Path("/etc/shadow")  # root-only already; a normal user cannot add one to /etc
    else:
        target = Path(f"/etc/veriscale-test-secret-{os.getpid()}")
        target.write_text("ROOT-ONLY-7e21")
        target.chmod(0o600)
    try:
        assert target.stat().st_size > 0  # control
        results = probe(session_spec(layout), f'attempt("read", lambda: read({str(target)!r}))')
    finally:
        if target.name.startswith("veriscale-test-secret"):
            target.unlink()
    assert failed(results["read"]) or results["read"] == ["ok", ""]


# --- 2. host-side tools must not follow links a session planted --------------------------------


def test_grep_ls_and_read_do_not_follow_planted_links(layout: dict[str, Path]) -> None:
    task = layout["task"]
    (task.parent / "t1.scores.json").write_text(json.dumps({"label_map": {"r01": "secret-run"}, "note": ARCHIVED}))
    box = ToolBox(task_dir=task, output_dir=layout["out"])
    planted = box.call("run", {"command": "ln -s ../../../t1.scores.json x; ln -s /etc/hostname h; mkdir d; "
                                          "ln -s ../../../../t1.scores.json d/y; echo ok"})
    assert not planted.is_error and "exit code: 0" in planted.text
    for call in (box.call("grep", {"pattern": "ARCHIVED|secret-run", "path": str(layout["out"])}),
                 box.call("grep", {"pattern": "ARCHIVED", "path": str(layout["out"] / "x")}),
                 box.call("read", {"path": str(layout["out"] / "x")}),
                 box.call("read", {"path": str(layout["out"] / "d" / "y")}),
                 box.call("find", {"pattern": "*", "path": str(layout["out"])}),
                 box.call("ls", {"path": str(layout["out"])})):
        assert ARCHIVED not in call.text and "secret-run" not in call.text, call.text
    listing = box.call("ls", {"path": str(layout["out"])}).text
    size = str((task.parent / "t1.scores.json").stat().st_size)
    assert f"{size} bytes" not in listing


# --- 3. the delivery step must not write through a planted link --------------------------------


def test_delivery_does_not_write_through_a_planted_out_link(layout: dict[str, Path]) -> None:
    task, out = layout["task"], layout["out"]
    rollouts = task / "rollouts"
    before = {p: p.read_bytes() for p in rollouts.rglob("*") if p.is_file()}
    base = rollouts / "r01" / "deliverables"
    _sh(session_spec(layout), f"rm -rf out; ln -s {rollouts / 'r01'} out; mkdir -p real; ln -s {base} real/deliverables; true")
    for target in (out / "out" / "deliverables", out / "real" / "deliverables"):
        try:
            copy_base(base, target)
            keep_base_files(base, target)
        except (OSError, ValueError) as exc:  # refusing is fine; writing through is not
            print(f"refused: {exc}")
    after = {p: p.read_bytes() for p in rollouts.rglob("*") if p.is_file()}
    assert after == before


# --- 4. scoring grades only what the host delivered --------------------------------------------


def test_scoring_reads_only_the_host_written_delivery(tmp_path: Path) -> None:
    from veriscale.harness.scoring.score import read_run

    run = tmp_path / "t1.runs" / "x"
    hostile = run / "sessions" / "adjudicate"
    (hostile / "deliverables").mkdir(parents=True)
    (hostile / "deliverables" / "report.md").write_text("chosen by the session")
    (hostile / "finish.json").write_text(json.dumps({"base": "r02", "revisions": [], "unresolved": []}))
    delivery = run / "delivery"
    (delivery / "deliverables").mkdir(parents=True)
    (delivery / "deliverables" / "report.md").write_text("gated by the host")
    (delivery / "finish.json").write_text(json.dumps({"base": "r01", "revisions": [], "unresolved": []}))
    found = read_run(run)
    assert found.deliverables == delivery / "deliverables" and found.base == "r01"
    # A session-written pair alone is never graded.
    import shutil

    shutil.rmtree(delivery)
    with pytest.raises(Exception, match="delivery"):
        read_run(run)


# --- 6. no secret on disk ----------------------------------------------------------------------


def test_pi_models_json_carries_no_api_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-SECRET-4411"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("VERISCALE_API_KEY", secret)
    (tmp_path / "t").mkdir()
    spec = SessionSpec(phase="resolve", system_prompt="s", user_prompt="u", task_dir=tmp_path / "t",
                       output_dir=tmp_path / "o", transcript_path=tmp_path / "tr" / "resolve.jsonl",
                       model_uri="http://127.0.0.1:9/v1#m")
    executor = PiExecutor.__new__(PiExecutor)  # no pi needed to build its config
    from veriscale.harness.sessions.executors import _endpoint

    path = executor._models_json(spec, _endpoint(spec.model_uri), "http://127.0.0.1:9/v1")
    assert secret not in path.read_text()
    for file in tmp_path.rglob("*"):
        if file.is_file():
            assert secret not in file.read_text(errors="replace"), file


# --- 7. no existence oracle --------------------------------------------------------------------


def test_record_errors_do_not_tell_whether_a_host_path_exists(tmp_path: Path) -> None:
    exists = tmp_path / "host-secret.json"
    exists.write_text("{not json")
    answers = []
    for target in (exists, tmp_path / "no-such-file.json"):
        record = tmp_path / f"out-{len(answers)}" / "ledger.json"
        record.parent.mkdir()
        record.symlink_to(target)
        _, problems = read_record(record, "resolver")
        answers.append(" ".join(problems).replace(str(record), "RECORD"))
    assert answers[0] == answers[1], answers

