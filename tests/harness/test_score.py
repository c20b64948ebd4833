"""`veriscale harness score`: the grader contract, select + (revised - base_regraded), the
no-base and select-only cases, bootstrap intervals, preflight refusal and drift warnings.

A tiny test grader reads `grade.txt` from the deliverables (0.5 when absent), so the expected
numbers follow from the archive; the example grader (examples/grader/grade.py) checks the
fixture tasks against their answer keys, which live outside the task folders."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from veriscale.cli.harness import register
from veriscale.errors import UserError
from veriscale.harness.scoring.bootstrap import bootstrap_mean
from veriscale.harness.scoring.score import (
    GraderCommand, GraderFailure, ScoreItem, explicit_delivery, parse_grader_output, read_run,
    score_deliveries, write_report,
)
from veriscale.harness.skills.library import BUILTIN_SKILLS_DIR

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_GRADER = REPO / "examples" / "grader" / "grade.py"
FILE_GRADER = """
import argparse, json, pathlib, sys
p = argparse.ArgumentParser(); p.add_argument('--task'); p.add_argument('--deliverables')
a = p.parse_args()
f = pathlib.Path(a.deliverables) / 'grade.txt'
print('grading', a.task, file=sys.stderr)
print(json.dumps({'score': float(f.read_text()) if f.is_file() else 0.5, 'seen': sorted(x.name for x in pathlib.Path(a.deliverables).iterdir())}))
"""


@pytest.fixture(scope="module")
def file_grader(tmp_path_factory: pytest.TempPathFactory) -> GraderCommand:
    path = tmp_path_factory.mktemp("grader") / "file_grader.py"
    path.write_text(FILE_GRADER)
    return GraderCommand.parse(f"{shlex.quote(sys.executable)} {shlex.quote(str(path))}")


def example_grader(fixture_root: Path) -> GraderCommand:
    return GraderCommand.parse(f"{shlex.quote(sys.executable)} {shlex.quote(str(EXAMPLE_GRADER))} "
                               f"--references {shlex.quote(str(fixture_root))}")


def delivered(tmp_path: Path, name: str, grade: float | None = None, source: Path | None = None) -> Path:
    folder = tmp_path / name / "deliverables"
    if source is not None:
        shutil.copytree(source, folder)
    folder.mkdir(parents=True, exist_ok=True)
    if grade is not None:
        (folder / "grade.txt").write_text(str(grade))
    return folder


# --- the grader contract -----------------------------------------------------------------------


def test_grader_output_must_be_one_json_line_with_a_score_in_range() -> None:
    grade = parse_grader_output('\n{"score": 0.25, "checks": 4}\n')
    assert grade.score == 0.25 and grade.extra == {"checks": 4}
    for bad, reason in [("", "exactly one"), ("ok\n{\"score\": 1}", "exactly one"), ("score=1", "not JSON"),
                        ('{"value": 1}', "no \"score\""), ('{"score": 1.5}', "[0, 1]"),
                        ('{"score": true}', "must be a number"), ('{"score": NaN}', "must be a number")]:
        with pytest.raises(GraderFailure, match=reason.replace("[", r"\[").replace("]", r"\]")):
            parse_grader_output(bad)


def test_missing_or_non_executable_grader_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not on PATH"):
        GraderCommand.parse("no-such-grader-xyz --flag")
    script = tmp_path / "grade.py"
    script.write_text("print('{}')")
    with pytest.raises(UserError, match="not an executable file"):
        GraderCommand.parse(str(script))
    with pytest.raises(UserError, match="empty"):
        GraderCommand.parse("  ")


# --- the score formula -------------------------------------------------------------------------


def test_final_is_select_plus_revised_minus_regraded_base(materialized: dict, file_grader: GraderCommand,
                                                          tmp_path: Path) -> None:
    task = materialized["data_cleanup"]
    base = task["by_name"]["d-run-a"]
    select = task["archive"]["scores"][base]
    item = ScoreItem(task["dir"], explicit_delivery(delivered(tmp_path, "run", 0.9), base))
    report = score_deliveries([item], grader=file_grader, seed=3)
    (result,) = report.tasks
    assert result.error is None and result.select == select
    assert result.revised == 0.9 and result.base_regraded == 0.5
    assert result.final == pytest.approx(select + (0.9 - 0.5))
    pool = [v for v in task["archive"]["scores"].values()]
    assert result.single_rollout == pytest.approx(sum(pool) / len(pool)) and result.oracle == max(pool)
    assert report.methods["harness"].mean == pytest.approx(result.final)
    assert report.comparisons["harness - select_only"].mean == pytest.approx(0.4)
    assert result.grades["base"]["extra"]["seen"] == ["customers_clean.csv", "summary.json"]  # no sidecars


def test_no_base_scores_the_delivery_itself(materialized: dict, file_grader: GraderCommand, tmp_path: Path) -> None:
    task = materialized["quarterly_report"]
    report = score_deliveries([ScoreItem(task["dir"], explicit_delivery(delivered(tmp_path, "run", 0.7), "none"))],
                              grader=file_grader)
    (result,) = report.tasks
    assert result.base is None and result.select is None and result.base_regraded is None
    assert result.final == 0.7
    assert report.methods["select_only"] is None and report.comparisons["harness - select_only"] is None


def test_select_only_uses_archived_scores_and_never_grades(materialized: dict, tmp_path: Path) -> None:
    items, expected = [], []
    for name, original in (("data_cleanup", "d-run-b"), ("finance_workbook", "opus-run-3")):
        task = materialized[name]
        label = task["by_name"][original]
        items.append(ScoreItem(task["dir"], explicit_delivery(delivered(tmp_path, name), label)))
        expected.append(task["archive"]["scores"][label])
    rebuild = materialized["quarterly_report"]
    items.append(ScoreItem(rebuild["dir"], explicit_delivery(delivered(tmp_path, "q"), "none")))
    report = score_deliveries(items, select_only=True)
    assert [t.final for t in report.tasks[:2]] == expected and report.grader is None
    assert report.tasks[2].error is not None and "rebuild" in report.tasks[2].error
    assert report.methods["select_only"].mean == pytest.approx(sum(expected) / 2)
    assert "harness" not in report.methods and report.methods["select_only"].n == 2


def test_symlinks_in_a_delivery_never_reach_the_grader(materialized: dict, file_grader: GraderCommand,
                                                       tmp_path: Path) -> None:
    outside = tmp_path / "key.txt"
    outside.write_text("1.0")
    folder = delivered(tmp_path, "run")
    os.symlink(outside, folder / "grade.txt")
    task = materialized["quarterly_report"]
    report = score_deliveries([ScoreItem(task["dir"], explicit_delivery(folder, "none"))], grader=file_grader)
    assert report.tasks[0].revised == 0.5
    assert any("grade.txt (symlink" in w for w in report.warnings)


# --- preflight and drift -----------------------------------------------------------------------


def test_preflight_refuses_a_grader_that_prints_garbage(materialized: dict, tmp_path: Path) -> None:
    script = tmp_path / "garbage.py"
    script.write_text("print('looks good to me')\n")
    grader = GraderCommand.parse(f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}")
    task = materialized["data_cleanup"]
    item = ScoreItem(task["dir"], explicit_delivery(delivered(tmp_path, "run"), "none"))
    with pytest.raises(UserError, match="failed its preflight .* not JSON"):
        score_deliveries([item], grader=grader)


def test_preflight_refuses_a_grader_that_crashes(materialized: dict, tmp_path: Path) -> None:
    script = tmp_path / "crash.py"
    script.write_text("import sys; sys.exit('no answer key here')\n")
    grader = GraderCommand.parse(f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}")
    item = ScoreItem(materialized["data_cleanup"]["dir"], explicit_delivery(delivered(tmp_path, "run"), "none"))
    with pytest.raises(UserError, match="exited with status 1: no answer key here"):
        score_deliveries([item], grader=grader)


def test_drift_beyond_tolerance_is_listed(materialized: dict, file_grader: GraderCommand, tmp_path: Path) -> None:
    task = materialized["data_cleanup"]
    base = task["by_name"]["d-run-c"]  # archived 0.2; the test grader re-grades it 0.5
    item = ScoreItem(task["dir"], explicit_delivery(delivered(tmp_path, "run", 0.6), base))
    report = score_deliveries([item], grader=file_grader, tolerance=0.05)
    assert report.drift == [{"task": "data_cleanup", "base": base, "archived": 0.2, "regraded": 0.5,
                             "diff": pytest.approx(0.3)}]
    assert any("drift" in w and f"data_cleanup/{base}" in w for w in report.warnings)
    quiet = score_deliveries([item], grader=file_grader, tolerance=0.5)
    assert quiet.drift == [] and not any("drift" in w for w in quiet.warnings)


# --- bootstrap ---------------------------------------------------------------------------------


def test_bootstrap_interval_contains_the_mean_and_is_deterministic() -> None:
    values = [0.2, 0.9, 0.4, 0.75, 0.6, 0.1, 0.55, 0.8]
    first = bootstrap_mean(values, seed=7)
    again = bootstrap_mean(values, seed=7)
    other = bootstrap_mean(values, seed=8)
    assert first == again and first != other
    assert first.low < first.mean < first.high and first.mean == pytest.approx(sum(values) / len(values))
    assert first.high - first.low < max(values) - min(values)
    narrow = bootstrap_mean(values, seed=7, confidence=0.5)
    assert first.low <= narrow.low and narrow.high <= first.high
    single = bootstrap_mean([0.3])
    assert (single.low, single.high, single.n) == (0.3, 0.3, 1)
    assert bootstrap_mean([]) is None
    with pytest.raises(UserError):
        bootstrap_mean(values, n_resamples=0)


# --- end to end: skills repair a workbook, the example grader scores it ------------------------


def test_repaired_workbook_scores_above_its_base_with_the_example_grader(
        materialized: dict, fixture_root: Path, tmp_path: Path) -> None:
    task = materialized["finance_workbook"]
    base = task["by_name"]["opus-run-1"]
    base_book = task["dir"] / "rollouts" / base / "deliverables" / "model.xlsx"
    run = tmp_path / "runs" / "finance_workbook"
    out = run / "delivery" / "deliverables"
    out.mkdir(parents=True)
    edit = [sys.executable, str(BUILTIN_SKILLS_DIR / "repair-workbook" / "scripts" / "xlsx_set_cells.py"),
            str(base_book), str(out / "model.xlsx"), "--set", "Summary!B6==B1/500000-1"]
    assert subprocess.run(edit, capture_output=True).returncode == 0
    refresh = [sys.executable, str(BUILTIN_SKILLS_DIR / "evidence-xlsx" / "scripts" / "xlsx_recalc.py"),
               str(out / "model.xlsx"), "--write-cache", str(out / "model.xlsx")]
    assert subprocess.run(refresh, capture_output=True).returncode == 0
    (out.parent / "finish.json").write_text(json.dumps({"base": base, "revisions": [{"cell": "Summary!B6"}],
                                                        "unresolved": []}))
    delivery = read_run(run)
    assert delivery.base == base and delivery.deliverables == out and len(delivery.revisions) == 1

    grader = example_grader(fixture_root)
    report = score_deliveries([ScoreItem(task["dir"], delivery)], grader=grader, tolerance=1.0)
    (result,) = report.tasks
    assert result.error is None, result.error
    assert result.revised == 1.0 and result.base_regraded < 1.0
    assert result.final == pytest.approx(result.select + 1.0 - result.base_regraded)
    assert report.preflight and "finance_workbook" in report.preflight
    saved = json.loads(write_report(report, run / "score.json").read_text())
    assert saved["tasks"][0]["final"] == pytest.approx(result.final)


def test_read_run_errors_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="holds no delivery/ folder"):
        read_run(tmp_path)
    (tmp_path / "delivery").mkdir()
    with pytest.raises(UserError, match="finish.json' is not readable JSON"):
        read_run(tmp_path)
    (tmp_path / "delivery" / "finish.json").write_text('{"base": 3}')
    with pytest.raises(UserError, match="string \"base\""):
        read_run(tmp_path)
    (tmp_path / "delivery" / "finish.json").write_text('{"base": "none", "revisions": [], "unresolved": []}')
    with pytest.raises(UserError, match="has no deliverables/ folder"):
        read_run(tmp_path)


# --- the CLI -----------------------------------------------------------------------------------


def cli() -> typer.Typer:
    app = typer.Typer()
    register(app)
    app.callback()(lambda: None)
    return app


def test_cli_scores_several_tasks_and_writes_the_results_file(materialized: dict, fixture_root: Path,
                                                              tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    tasks = []
    for name, original in (("data_cleanup", "d-run-b"), ("quarterly_report", "w2")):
        task = materialized[name]
        label = task["by_name"][original]
        folder = runs / name / "delivery"
        shutil.copytree(task["dir"] / "rollouts" / label / "deliverables", folder / "deliverables")
        (folder / "finish.json").write_text(json.dumps({"base": label, "revisions": [], "unresolved": []}))
        tasks.append(str(task["dir"]))
    grader = f"{shlex.quote(sys.executable)} {shlex.quote(str(EXAMPLE_GRADER))} --references {shlex.quote(str(fixture_root))}"
    result = CliRunner().invoke(cli(), ["harness", "score", *tasks, "--runs", str(runs), "--grader", grader,
                                        "--json", "--tolerance", "1"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert Path(payload["file"]) == runs / "score.json" and (runs / "score.json").is_file()
    for row in payload["tasks"]:  # unrevised deliveries: the harness keeps the archived select score
        assert row["final"] == pytest.approx(row["select"])
    assert set(payload["methods"]) == {"single_rollout", "select_only", "harness", "oracle"}

    select = CliRunner().invoke(cli(), ["harness", "score", *tasks, "--runs", str(runs), "--select-only"])
    assert select.exit_code == 0, select.output
    assert (runs / "score-select-only.json").is_file()


def test_cli_refuses_ambiguous_or_incomplete_input(materialized: dict, tmp_path: Path) -> None:
    task = str(materialized["data_cleanup"]["dir"])
    no_where = CliRunner().invoke(cli(), ["harness", "score", task, "--select-only"])
    assert no_where.exit_code == 2 and "exactly one of --run" in no_where.output
    no_base = CliRunner().invoke(cli(), ["harness", "score", task, "--delivered", str(tmp_path), "--select-only"])
    assert no_base.exit_code == 2 and "--delivered needs --base" in no_base.output
    no_grader = CliRunner().invoke(cli(), ["harness", "score", task, "--delivered", str(tmp_path), "--base", "none"])
    assert no_grader.exit_code == 2 and "needs --grader" in no_grader.output
    bad_base = CliRunner().invoke(cli(), ["harness", "score", task, "--delivered", str(tmp_path), "--base", "r99",
                                          "--select-only"])
    assert bad_base.exit_code == 2 and "'r99'" in bad_base.output


def test_cli_run_id_reads_the_runner_layout_and_reports_a_task_without_delivery(
        fixture_root: Path, tmp_path: Path) -> None:
    from veriscale.harness.workspace.materialize import materialize

    tasks = []
    for name in ("data_cleanup", "quarterly_report"):
        materialize(fixture_root / name, tmp_path / name, seed=2)
        tasks.append(tmp_path / name)
    archive = json.loads((tmp_path / "data_cleanup.scores.json").read_text())
    session = tmp_path / "data_cleanup.runs" / "run-1" / "delivery"
    (session / "deliverables").mkdir(parents=True)
    (session / "finish.json").write_text(json.dumps({"base": "r02", "revisions": [], "unresolved": ["x"]}))
    result = CliRunner().invoke(cli(), ["harness", "score", *map(str, tasks), "--run-id", "run-1", "--select-only",
                                        "--json"])
    assert result.exit_code == 1, result.output
    payload = json.loads(result.stdout)
    assert Path(payload["file"]) == tmp_path / "score-run-1-select-only.json"
    scored, missing = payload["tasks"]
    assert scored["final"] == archive["scores"]["r02"] and scored["unresolved"] == 1
    assert missing["final"] is None and "quarterly_report.runs/run-1' does not exist" in missing["error"]
