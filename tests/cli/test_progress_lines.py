"""Progress when stderr is not a terminal: plain ``progress:`` lines on stderr, throttled, and
stdout left to the result (``--json`` stays one clean JSON document)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.scripted_progress import CLI_MAIN
from veriscale.cli.options import LineProgress

REPO = Path(__file__).resolve().parents[2]
TRAJECTORY = REPO / "examples" / "progress" / "fail_trajectory.json"
MAIN = CLI_MAIN  # veriscale's own entry point with the scripted progress double registered


def test_track_piped_shows_progress_lines_on_stderr_and_clean_json_on_stdout(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", MAIN, "track", str(TRAJECTORY), "--every", "1", "--json",
                           "--model", "scripted-progress", "--store", str(tmp_path / "s.sqlite3")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)  # nothing but the JSON on stdout
    assert payload["schema"] == "veriscale.track/1" and len(payload["curves"][0]["points"]) == 17
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("progress:")]
    assert lines[0].startswith("progress: track ") and not lines[0].startswith("progress: track 0/")
    assert lines[-1].startswith("progress: track 17/17 checkpoint calls (100 %")
    assert 3 <= len(lines) <= 12  # every 10 % at most, not one line a call
    assert "progress:" not in proc.stdout


def test_line_progress_is_throttled_by_time_and_share() -> None:
    now = [0.0]
    said: list[str] = []
    bar = LineProgress(100, "bench", "pairs", clock=lambda: now[0], write=said.append)
    for _ in range(5):  # 5 %, under a second: nothing yet (nothing is said before work is done)
        bar.advance()
    assert said == []
    now[0] = 1.5
    bar.advance()  # a second passed
    assert said[-1] == "progress: bench 6/100 pairs (6 %, 2 s)"
    for _ in range(94):
        bar.advance()
    assert said[-1] == "progress: bench 100/100 pairs (100 %, 2 s)" and len(said) == 11
    bar.advance()  # more calls than planned (adaptive selection) never count past the total
    assert bar.done == 100 and len(said) == 11  # and the end is said once


def test_an_early_end_is_said_once() -> None:
    said: list[str] = []
    bar = LineProgress(100, "select", "calls", clock=lambda: 0.0, write=said.append)
    for _ in range(13):
        bar.advance()
    bar.finish()
    bar.finish()
    assert said[-1] == "progress: select 13/100 calls (13 %, 0 s)" and len(said) == 2  # 10, 13
