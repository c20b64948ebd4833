"""The weak-model notice comes with verdicts of the embedded model, not with --dry-run estimates."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.hang_guard import guarded_run
from veriscale.models.embedded import EMBEDDED_NOTICE

pytestmark = pytest.mark.embedded

EX = Path(__file__).resolve().parents[2] / "examples" / "pair"
NOTICE_START = EMBEDDED_NOTICE.split(":")[0]  # "Using the embedded SmolLM2-135M model"


def cli(*args: str, store: Path) -> subprocess.CompletedProcess:
    return guarded_run([sys.executable, "-m", "veriscale", *args, "--store", str(store)],
                       capture_output=True, text=True)


@pytest.mark.parametrize("args", [
    ["score", str(EX / "task.md"), str(EX / "a.md")],
    ["compare", str(EX / "task.md"), str(EX / "a.md"), str(EX / "b.md")],
    ["select", str(EX / "a.md"), str(EX / "b.md"), "--task", str(EX / "task.md")],
], ids=["score", "compare", "select"])
def test_dry_run_prints_no_weak_model_notice(tmp_path, args):
    proc = cli(*args, "--dry-run", store=tmp_path / "s.sqlite3")
    assert proc.returncode == 0, proc.stderr
    assert "model calls" in proc.stdout  # the estimate, and nothing spent
    assert NOTICE_START not in proc.stderr and NOTICE_START not in proc.stdout


def test_a_verdict_prints_the_notice_once(tmp_path):
    proc = cli("score", str(EX / "task.md"), str(EX / "a.md"), store=tmp_path / "s.sqlite3")
    assert proc.returncode == 0, proc.stderr
    assert " ".join(proc.stderr.split()).count(NOTICE_START) == 1
