"""``select`` through the real embedded model, then ``veriscale select`` on the same store.

Model cost: one PPT run over three one-line answers with one criterion and k=1, i.e.
3 + 1·2 = 5 comparisons × 2 slots = 10 model calls; every CLI run below reuses them from the
store (0 new calls), so the CLI tests check wiring, exit codes and output, not model speed.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from tests.selection.test_select import TASK, ScriptedVerifierDouble
from veriscale.cli import select as select_cli
from veriscale.cli.select import register, short_ids
from veriscale.selection.inputs import resolve_inputs
from veriscale.data.model import Candidate
from veriscale.engine.store import Store
from veriscale.selection.select import select
from veriscale.verify.criteria import load_criteria
from veriscale.verify.reward import Verifier

REPO = Path(__file__).resolve().parents[2]
POOL = REPO / "examples" / "terminal_bench" / "merge-diff-arc-agi-task.jsonl"
SETTINGS = ["--criteria", "general", "--criterion", "Correctness", "-k", "1", "--no-adaptive"]


def cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """Keeps 'select' a sub-command, as in the real app."""

    register(app)
    return app


def invoke(*args: str):
    return CliRunner().invoke(cli(), ["select", *args])


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("select")
    paths = {"task": root / "task.md", "four": root / "four.md", "five": root / "five.md", "sum": root / "sum.md"}
    paths["task"].write_text("What is 2 + 2? Reply with the number only.\n")
    paths["four"].write_text("4\n")
    paths["five"].write_text("5\n")
    paths["sum"].write_text("2 + 2 = 22\n")
    paths["store"] = root / "store.sqlite3"
    return paths


@pytest.fixture(scope="module")
def api_selection(files, embedded_model):
    """The one real-model run (10 calls), stored for the CLI tests."""
    task, candidates = resolve_inputs([str(files[n]) for n in ("task", "four", "five", "sum")], None, None)
    store = Store.open(files["store"])
    verifier = Verifier(embedded_model, store=store, criteria=load_criteria("general").only(["Correctness"]))
    seen = []
    sel = select(task, candidates, verifier=verifier, method="ppt", k=1, adaptive=False,
                 on_progress=lambda done, planned: seen.append((done, planned)))
    store.close()
    return sel, seen


def cli_args(files, *extra: str) -> list[str]:
    return [str(files[n]) for n in ("task", "four", "five", "sum")] + SETTINGS + ["--store", str(files["store"]), *extra]


def test_select_through_the_embedded_model(api_selection):
    sel, seen = api_selection
    assert sel.n_comparisons == 3 + 1 * 2
    assert sel.usage.model_calls == 10 and sel.usage.failed_calls == 0
    assert seen[-1] == (10, 10) and len(seen) == 10
    assert sorted(sel.ranking) == [0, 1, 2] and sel.index == sel.ranking[0]
    assert sum(sel.scores) == pytest.approx(1.0)
    assert 0.0 <= sel.confidence <= 1.0
    for row in sel.criteria_scores:
        assert 0.0 <= row["Correctness"] <= 1.0
    assert sel.reason.text.startswith(f"{sel.best.id} over ")
    assert sel.reason.gaps[0].criterion == "Correctness"


def test_cli_json_reuses_the_store_and_names_the_same_pick(files, api_selection):
    sel, _ = api_selection
    result = invoke(*cli_args(files, "--json"))
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["usage"]["model_calls"] == 0 and data["usage"]["cache_hits"] == 10
    assert data["best"]["id"] == sel.best.id and data["best"]["source"].endswith(".md")
    assert data["confidence"] == pytest.approx(sel.confidence)
    assert [r["id"] for r in data["ranking"]] == [sel.candidates[i].id for i in sel.ranking]
    assert data["task"]["text"].startswith("What is 2 + 2?")


def test_cli_table_shows_ranking_reason_and_pick(files, api_selection):
    sel, _ = api_selection
    result = invoke(*cli_args(files))
    assert result.exit_code == 0, result.output
    assert "reason:" in result.stdout and f"picked: {sel.best.id}" in result.stdout
    assert "Correctness" in result.stdout and "confidence" in result.stdout


def test_min_confidence_exit_code(files, api_selection):
    sel, _ = api_selection
    at = invoke(*cli_args(files, "--json", "--min-confidence", f"{sel.confidence:.6f}"[:8]))
    assert at.exit_code == 0, at.output
    if sel.confidence < 0.999:
        above = invoke(*cli_args(files, "--json", "--min-confidence", f"{min(sel.confidence + 0.001, 1.0):.6f}"))
        assert above.exit_code == 4
        assert "not decided" in above.output
        assert json.loads(above.stdout)["decided"] is False


def test_dry_run_on_the_bundled_pool_reports_the_plan_without_calls(tmp_path):
    store = tmp_path / "s.sqlite3"
    result = invoke(str(POOL), "--dry-run", "--json", "--store", str(store))
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["n_candidates"] == 5 and plan["comparisons_planned"] == 5 + 2 * 3 + 1
    assert plan["calls_per_judgement"] == 6  # agent criteria (3) × 2 slots: trajectories default to 'agent'
    assert plan["model_calls_upper_bound"] >= plan["model_calls_planned"] > 0
    assert Store.open(store).count_calls() == 0


def test_single_candidate_is_returned_and_said(files, tmp_path):
    result = invoke(str(files["task"]), str(files["four"]), "--json", "--store", str(tmp_path / "s.sqlite3"))
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["best"]["id"] == "four" and data["usage"]["model_calls"] == 0
    assert any("one candidate" in n for n in data["notes"])


def test_empty_folder_is_an_error(tmp_path):
    (tmp_path / "runs").mkdir()
    result = invoke(str(tmp_path / "runs"), "--store", str(tmp_path / "s.sqlite3"))
    assert result.exit_code == 2
    assert "error" in result.output and "Traceback" not in result.output


def test_candidates_of_different_tasks_are_an_error(tmp_path):
    preds = tmp_path / "preds.jsonl"
    rows = [{"instance_id": f"pkg__pkg-{n}", "model_name_or_path": "agent", "model_patch": f"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+{n}\n"}
            for n in (1, 2)]
    preds.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = invoke(str(preds), "--store", str(tmp_path / "s.sqlite3"))
    assert result.exit_code == 2
    assert "different tasks" in result.output


def test_task_option_and_leading_task_file_are_the_same_selection(files):
    via_option = resolve_inputs([str(files["four"]), str(files["five"])], str(files["task"]), None)
    leading = resolve_inputs([str(files["task"]), str(files["four"]), str(files["five"])], None, None)
    assert via_option[0].text == leading[0].text
    assert [c.id for c in via_option[1]] == [c.id for c in leading[1]] == ["four", "five"]
    pool_task, pool = resolve_inputs([str(POOL)], None, None)
    assert pool_task is None and len(pool) == 5 and pool[0].task.id == "merge-diff-arc-agi-task"


def test_table_shows_the_part_of_ids_that_differs_when_they_share_a_long_prefix(monkeypatch):
    suffixes = ["djqxa8x", "ydHFjQj", "mSdX5Nk", "5Yk2WfS", "Ga3s6zL"]
    cands = [Candidate(id=f"merge-diff-arc-agi-task__{s}", text=f"answer {n}") for n, s in enumerate(suffixes)]
    double = ScriptedVerifierDouble({c.text: 0.1 * n for n, c in enumerate(cands)})
    sel = select(TASK, cands, verifier=double, method="round_robin", adaptive=False)
    out = io.StringIO()
    monkeypatch.setattr(select_cli, "console", Console(file=out, width=80))
    select_cli._render(sel, "terminal")
    text = out.getvalue()
    assert "criteria terminal" in text  # the table names the criteria it judged under
    rows = [line for line in text.splitlines() if line.startswith("│")]
    assert len(rows) == 5 and len(set(rows)) == 5
    for suffix in suffixes:
        assert sum(f"…{suffix}" in row for row in rows) == 1
    assert "… = merge-diff-arc-agi-task__" in text  # the shared prefix, said once
    assert "picked: merge-diff-arc-agi-task__Ga3s6zL" in text


def test_short_ids_keep_short_ids_whole_and_never_make_two_look_alike():
    assert short_ids(["run-1", "run-2"]) == (["run-1", "run-2"], "")
    attempts = [f"a-very-long-shared-prefix/trial-000123-attempt-{n}" for n in (1, 2)]
    assert short_ids(attempts) == (["…attempt-1", "…attempt-2"], "a-very-long-shared-prefix/trial-000123-")
    alike_ends = [f"{'z' * 30}-middle{n}-{'z' * 30}" for n in (1, 2)]
    assert short_ids(alike_ends) == (alike_ends, "")
    (single,), _ = short_ids(["x" * 30 + "tail"])
    assert len(single) == 20 and single.endswith("tail")
