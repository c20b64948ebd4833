"""``veriscale bench`` on two real dev pairs through the embedded model: table, JSON, PNG.

Model cost: 2 pairs × 1 criterion × 2 slots × 1 slot order = 4 model calls; the discrete row
and the second (table) run reuse them from the store.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from veriscale.cli.bench import register

REPO = Path(__file__).resolve().parents[2]
DEV_PAIRS = Path("/work/shared/data/pairwise_dev.jsonl")
if not DEV_PAIRS.exists():
    DEV_PAIRS = REPO.parent / "shared" / "data" / "pairwise_dev.jsonl"
POOL = REPO / "examples" / "terminal_bench" / "merge-diff-arc-agi-task.jsonl"


def invoke(*args: str):
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """Keeps 'bench' a sub-command, as in the real app."""

    register(app)
    return CliRunner().invoke(app, ["bench", *args])


@pytest.fixture(scope="module")
def two_pairs(tmp_path_factory) -> Path:
    """The two shortest real dev pairs (so the embedded model reads little)."""
    rows = [json.loads(line) for line in DEV_PAIRS.read_text("utf-8").splitlines() if line.strip()]
    rows.sort(key=lambda r: (len(r["instruction"]) + len(r["output_1"]) + len(r["output_2"]), r["id"]))
    path = tmp_path_factory.mktemp("bench") / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[:2]), "utf-8")
    return path


def test_bench_pairs_writes_json_png_and_table(two_pairs, tmp_path, embedded_model):
    store = str(tmp_path / "store.sqlite3")
    plot, report = tmp_path / "bench.png", tmp_path / "bench.json"
    common = [str(two_pairs), "--criterion", "Correctness", "--repeats", "1", "--discrete-vs-continuous",
              "--store", store]
    result = invoke(*common, "--json", "--plot", str(plot), "--output", str(report))
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["kind"] == "pairs" and data["n_items"] == 2
    assert data["estimate"]["model_calls"] == 4 and data["estimate"]["cached_calls"] == 0
    continuous, discrete = data["rows"]
    assert continuous["label"].endswith("continuous") and discrete["label"].endswith("discrete")
    assert continuous["usage"]["model_calls"] == 4
    assert discrete["usage"]["model_calls"] == 0 and discrete["usage"]["cache_hits"] == 4
    cost = continuous["cost"]  # honest cost: the embedded model says what it evaluated after KV reuse
    assert cost["calls"] == 4 and cost["prompt_tokens_sent"] > 0 and cost["wall_s"] >= 0
    assert cost["prompt_tokens_processed"] + cost["cached_prompt_tokens"] == cost["prompt_tokens_sent"]
    assert "money" not in cost  # no price table, no money
    for row in data["rows"]:
        m = row["metrics"]
        assert m["n"] + m["failed"] == 2
        assert 0.0 <= m["accuracy"] <= 1.0 and 0.0 <= m["tie_rate"] <= 1.0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads(report.read_text())["rows"] == data["rows"]

    again = invoke(*common)
    assert again.exit_code == 0, again.output
    assert "accuracy" in again.stdout and "tie rate" in again.stdout and "SNR" in again.stdout
    assert "processed" in again.stdout and "tokens sent" in again.stdout
    assert "discrete" in again.stdout


def test_sweep_needs_yes_when_not_interactive(two_pairs, tmp_path, embedded_model):
    result = invoke(str(two_pairs), "--sweep", "g=2,5", "--criterion", "Correctness", "--repeats", "1",
                    "--store", str(tmp_path / "s.sqlite3"))
    assert result.exit_code == 2
    assert "--yes" in result.output and "bench plan:" in result.output


def test_pool_dry_run_estimates_only_tasks_with_disagreement(tmp_path, embedded_model):
    result = invoke(str(POOL), "--dry-run", "--json", "--store", str(tmp_path / "s.sqlite3"))
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["kind"] == "pools" and data["items"] == ["merge-diff-arc-agi-task"]
    assert data["estimate"]["upper_bound"] and data["estimate"]["model_calls"] > 0
    assert data["criteria"] == "agent"


def test_unknown_sweep_axis_is_a_clear_error(two_pairs, tmp_path):
    result = invoke(str(two_pairs), "--sweep", "k=1,2", "--store", str(tmp_path / "s.sqlite3"))
    assert result.exit_code == 2 and "pools" in result.output
