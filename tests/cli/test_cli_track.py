"""``veriscale track`` end to end on the embedded model: curve, VOC, events, --follow, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.cli.test_cli_verify import assert_one_line_error, cli

EX = Path(__file__).resolve().parents[2] / "examples" / "progress"


def test_track_the_bundled_success_and_failure(tmp_path: Path) -> None:
    plot = tmp_path / "curve.png"
    proc = cli("track", str(EX / "success_trajectory.json"), "--checkpoints", "2,4,6", "--plot", str(plot))
    assert proc.returncode == 0, proc.stderr
    assert "VOC (Spearman of step and progress)" in proc.stdout and "3 checkpoints of 18 steps" in proc.stdout
    assert "not a reliable judge" in proc.stderr  # the embedded model says what it is
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = cli("track", str(EX / "fail_trajectory.json"), "--checkpoints", "2,4,6,8", "--json")
    payload = json.loads(out.stdout)
    curve = payload["curves"][0]
    assert [p["step"] for p in curve["points"]] == [2, 4, 6, 8] and curve["outcome"] == 0
    assert all(0 <= p["value"] <= 1 and p["label_mass"] > 0 for p in curve["points"])
    assert isinstance(curve["voc"], float) and curve["cost"]["prompt_tokens"] < curve["cost"]["prompt_tokens_total"]
    runs = json.loads(cli("runs", "show", str(payload["run_id"])).stdout)
    assert runs["command"] == "track"


def test_bad_checkpoints_and_inputs_are_one_sentence(tmp_path: Path) -> None:
    traj = str(EX / "fail_trajectory.json")
    assert_one_line_error(cli("track", traj, "--checkpoints", "5,3"), "out of order")
    assert_one_line_error(cli("track", traj, "--checkpoints", "40"), "beyond the trajectory, which has 17 steps")
    assert_one_line_error(cli("track", traj, "--checkpoints", "a,b"), "--checkpoints")
    assert_one_line_error(cli("track", traj, "--regression-drop", "3"), "--regression-drop")
    assert_one_line_error(cli("track"), "--follow")
    empty = tmp_path / "empty.jsonl"
    empty.write_text(json.dumps({"problem": "Add 2 and 2.", "steps": [], "label": -1}) + "\n")
    assert_one_line_error(cli("track", str(empty)), "has no steps")
    many = tmp_path / "many.jsonl"
    many.write_text("".join(json.dumps({"id": f"s{i}", "problem": "p", "steps": ["a"], "label": -1}) + "\n"
                            for i in range(21)))
    assert_one_line_error(cli("track", str(many)), "21 runs", "--id", "--yes")


def _write(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()


def _step(text: str) -> str:
    return json.dumps({"role": "agent", "text": text, "observation": "ok"}) + "\n"


def test_follow_a_growing_file_until_done(tmp_path: Path) -> None:
    steps = tmp_path / "steps.jsonl"  # does not exist yet: track waits for it
    out = tmp_path / "curve.json"
    proc = subprocess.Popen([sys.executable, "-m", "veriscale", "track", "--follow", str(steps), "--output", str(out),
                             "--idle-timeout", "120"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err_fd = proc.stderr.fileno()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and b"waiting for" not in _peek(proc, proc.stderr):
        time.sleep(0.2)
    _write(steps, json.dumps({"task": "Create hello.txt containing hello"}) + "\n")
    _write(steps, _step("I will create the file."))
    half = _step("echo hello > hello.txt")
    _write(steps, half[:10])  # a partial line is waited for, not read as malformed
    _wait_read_to_end(proc, steps)  # track has read the partial line before the rest of it is written
    _write(steps, half[10:])
    _write(steps, "{not json\n")
    _write(steps, _step("cat hello.txt shows hello; done."))
    _write(steps, json.dumps({"done": True}) + "\n")
    stdout, stderr = proc.communicate(timeout=1800)  # generous: the model and the follow loop both wait
    stderr = _seen.pop(err_fd, b"").decode() + stderr
    assert proc.returncode == 0, stderr
    assert "waiting for" in stderr and "line 4" in stderr and "skipped" in stderr
    saved = json.loads(out.read_text())
    assert saved["ended"] == "done" and [p["step"] for p in saved["curves"][0]["points"]] == [1, 2, 3]
    assert "step    3" in stdout and "followed run ended (done)" in stdout


def test_follow_ctrl_c_saves_the_curve_so_far(tmp_path: Path) -> None:
    steps = tmp_path / "steps.jsonl"
    steps.write_text(json.dumps({"task": "Count to three"}) + "\n" + _step("one") + _step("two"))
    out = tmp_path / "curve.json"
    # A suite started in the background (`.ci/run &`) runs with SIGINT ignored, and an ignored
    # signal stays ignored across exec: give the child the default, as a terminal would.
    proc = subprocess.Popen([sys.executable, "-m", "veriscale", "track", "--follow", str(steps), "--output", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    out_fd = proc.stdout.fileno()
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and b"step    2" not in _peek(proc, proc.stdout):
        time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    _seen.pop(out_fd, None)
    assert proc.returncode == 130, stderr
    saved = json.loads(out.read_text())
    assert saved["ended"] == "interrupted" and len(saved["curves"][0]["points"]) == 2
    assert "Traceback" not in stderr


_seen: dict[int, bytes] = {}


def _wait_read_to_end(proc: subprocess.Popen, path: Path, guard_s: float = 600) -> None:
    """Wait until ``proc``'s open handle on ``path`` has read all of it (its offset in /proc's fdinfo);
    ``guard_s`` is a hang guard only."""
    size, target = path.stat().st_size, str(path)
    deadline = time.monotonic() + guard_s
    while True:
        assert proc.poll() is None, f"track exited {proc.returncode} before reading '{path}' to its end"
        fds = Path(f"/proc/{proc.pid}/fd")
        for fd in fds.iterdir():
            try:
                if os.readlink(fd) == target and int((fds.parent / "fdinfo" / fd.name).read_text().split()[1]) >= size:
                    return
            except (OSError, ValueError, IndexError):
                continue
        assert time.monotonic() < deadline, f"track did not read '{path}' to its end"
        time.sleep(0.05)


def _peek(proc: subprocess.Popen, stream) -> bytes:
    """What the process printed so far on ``stream`` (read without blocking; kept in _seen)."""
    fd = stream.fileno()
    os.set_blocking(fd, False)
    try:
        chunk = os.read(fd, 65536)
    except BlockingIOError:
        chunk = b""
    _seen[fd] = _seen.get(fd, b"") + chunk
    return _seen[fd]


def test_follow_stops_when_idle_and_strict_names_the_line(tmp_path: Path) -> None:
    steps = tmp_path / "steps.jsonl"
    steps.write_text(json.dumps({"task": "t"}) + "\n" + _step("one") + '{"role": "robot", "text": "x"}\n')
    proc = cli("track", "--follow", str(steps), "--strict", "--idle-timeout", "5")
    assert_one_line_error(proc, "line 3", "role 'robot'", "--strict")
    steps.write_text(_step("one"))
    proc = cli("track", "--follow", str(steps), "--idle-timeout", "3")
    assert_one_line_error(proc, "gives no task", "--task")
    steps.write_text(json.dumps({"task": "t"}) + "\n" + _step("one"))
    proc = cli("track", "--follow", str(steps), "--idle-timeout", "3", "--output", str(tmp_path / "o.json"))
    assert proc.returncode == 0 and "for 3 s" in proc.stderr and "(idle)" in proc.stdout
