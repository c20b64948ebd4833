"""Issue 30: symlink loops and full disks in `veriscale harness materialize` are sentences, not tracebacks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from veriscale.cli.harness import register
from veriscale.errors import UserError
from veriscale.harness.safe_fs import resolved

app = typer.Typer()
register(app)


@app.callback()
def _root() -> None:
    """Keep `harness` as a sub-command."""


runner = CliRunner()


def _source(root: Path) -> Path:
    source = root / "src"
    (source / "inputs").mkdir(parents=True)
    (source / "task.md").write_text("Sum the numbers.\n")
    (source / "inputs" / "numbers.csv").write_text("n\n1\n2\n")
    for i in range(2):
        run = source / "rollouts" / f"run-{i}"
        run.mkdir(parents=True)
        (run / "answer.md").write_text(f"Total: {3 + i}\n")
    return source


def _materialize(*args: str):
    result = runner.invoke(app, ["harness", "materialize", *args, "--json"])
    assert not isinstance(result.exception, (RuntimeError, OSError)), repr(result.exception)
    return result


def test_link_loops_inside_a_rollout_are_left_out_with_a_note(tmp_path: Path) -> None:
    source = _source(tmp_path)
    run0, run1 = source / "rollouts" / "run-0", source / "rollouts" / "run-1"
    os.symlink("b", run0 / "a")
    os.symlink("a", run0 / "b")
    os.symlink(".", run1 / "loop")
    os.symlink("self", run1 / "self")
    os.symlink(run0 / "answer.md", run1 / "linked.md")  # a link inside the source: still copied as a file
    result = _materialize(str(source), str(tmp_path / "task"))
    assert result.exit_code == 0, result.output
    left = {entry["path"]: entry["reason"] for entry in json.loads(result.stdout)["left_out"]}
    for path in ("rollouts/run-0/a", "rollouts/run-0/b", "rollouts/run-1/self"):
        assert "symlink loop" in left[path]
    assert "loop" in left["rollouts/run-1/loop/"]
    copied = {p.name for p in (tmp_path / "task" / "rollouts").rglob("*")}
    assert "linked.md" in copied and not {"a", "b", "self", "loop"} & copied
    assert not any(p.is_symlink() for p in (tmp_path / "task").rglob("*"))


@pytest.mark.parametrize("where", ["dest", "below", "source", "archive"])
def test_a_destination_or_source_that_is_a_loop_is_one_sentence(tmp_path: Path, where: str) -> None:
    source = _source(tmp_path)
    os.symlink(tmp_path / "y", tmp_path / "x")
    os.symlink(tmp_path / "x", tmp_path / "y")
    args = {
        "dest": [str(source), str(tmp_path / "x")],
        "below": [str(source), str(tmp_path / "x" / "task")],
        "source": [str(tmp_path / "x"), str(tmp_path / "task")],
        "archive": [str(source), str(tmp_path / "task"), "--archive-dir", str(tmp_path / "x")],
    }[where]
    result = _materialize(*args)
    if where == "source":  # a loop is not a folder: the source check says so first
        assert result.exit_code == 2 and "source folder" in result.output
        return
    assert result.exit_code == 2, result.output
    assert "symlink loop" in result.output and str(tmp_path / "x") in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "task").exists()


def test_resolved_is_a_user_error_for_a_loop(tmp_path: Path) -> None:
    os.symlink("loop", tmp_path / "loop")
    with pytest.raises(UserError, match="symlink loop"):
        resolved(tmp_path / "loop" / "deeper", "destination")
    assert resolved(tmp_path) == tmp_path.resolve()


def _can_mount_tmpfs(target: Path) -> bool:
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "-r", "-m", "sh", "-c", f"mount -t tmpfs -o size=1m tmpfs '{target}'"],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


def test_a_full_disk_is_one_sentence_and_leaves_nothing_behind(tmp_path: Path) -> None:
    full = tmp_path / "full"
    full.mkdir()
    if not _can_mount_tmpfs(full):
        pytest.skip("no user namespaces here: cannot mount a small tmpfs")
    source = _source(tmp_path)
    (source / "inputs" / "big.bin").write_bytes(os.urandom(3 << 20))  # 3 MiB into a 1 MiB disk
    (source / "rollouts" / "run-0" / "chart.bin").write_bytes(os.urandom(64 << 10))
    script = (f"mount -t tmpfs -o size=1m tmpfs '{full}' && "
              f"'{sys.executable}' -m veriscale harness materialize '{source}' '{full}/task'; "
              f"echo rc=$?; ls -A '{full}'")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    done = subprocess.run(["unshare", "-r", "-m", "sh", "-c", script], capture_output=True, text=True,
                          timeout=300, env=env)
    assert "rc=2" in done.stdout, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    error = " ".join(done.stderr.split())
    assert "no space left" in error and f"{full}/task" in error
    assert "needs at least 3.1 MiB" in error and "removed" in error
    listing = done.stdout.split("rc=2", 1)[1].split()
    assert listing == [], listing  # the partial task folder (and archive) are gone
