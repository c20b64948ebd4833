"""materialize: the task folder contract, answer keys left out, anonymous labels, safe copying."""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path

import pytest

from veriscale.errors import UserError
from veriscale.harness.workspace.materialize import materialize
from veriscale.harness.workspace.contract import TaskWorkspace, deliverable_files


def _all_names(folder: Path) -> set[str]:
    return {p.name for p in folder.rglob("*")}


def _small_source(root: Path, rollouts: int = 2) -> Path:
    source = root / "src"
    (source / "inputs").mkdir(parents=True)
    (source / "task.md").write_text("Sum the numbers.\n")
    (source / "inputs" / "numbers.csv").write_text("n\n1\n2\n")
    for i in range(rollouts):
        run = source / "rollouts" / f"run-{i}"
        run.mkdir(parents=True)
        (run / "answer.md").write_text(f"Total: {3 + i}\n")
    return source


def test_fixture_tasks_follow_the_contract(materialized: dict) -> None:
    for name, built in materialized.items():
        task = TaskWorkspace.open(built["dir"])
        assert task.spec_file.read_text().startswith("#")
        assert (task.inputs_dir).is_dir() and any(task.inputs_dir.iterdir())
        assert [r.label for r in task.rollouts] == [f"r{i:02d}" for i in range(1, len(task.rollouts) + 1)]
        for rollout in task.rollouts:
            assert rollout.deliverables(), f"{name}/{rollout.label} delivered nothing"
            assert list(rollout.trajectory_dir.iterdir()), f"{name}/{rollout.label} lost its trajectory"
        assert sorted(p.name for p in built["dir"].iterdir()) == ["rollouts", "spec", "workspace"]


def test_answer_keys_and_scores_are_left_out_and_reported(materialized: dict) -> None:
    expected = {
        "finance_workbook": {"golden.xlsx", "tests/", "scores.json"},
        "data_cleanup": {"expected_summary.json", "grader.py", "scores.json"},
        "quarterly_report": {"solution/", "task.toml", "scores.json"},
    }
    for name, keys in expected.items():
        built = materialized[name]
        reported = {path for path, _reason in built["report"].left_out}
        assert keys <= reported
        names = _all_names(built["dir"])
        assert not names & {"golden.xlsx", "tests", "scores.json", "expected_summary.json", "grader.py",
                            "solution", "task.toml", "test_model.py"}
        assert built["archive"]["materialize"]["left_out"]  # the report is kept with the archive too
    reasons = dict(materialized["finance_workbook"]["report"].left_out)
    assert reasons["golden.xlsx"] == "answer-key pattern 'golden*'"


def test_labels_are_anonymised_and_the_map_with_scores_lives_outside(materialized: dict) -> None:
    built = materialized["finance_workbook"]
    archive_file = Path(built["report"].archive_file)
    assert archive_file.parent == built["dir"].parent
    assert built["dir"] not in archive_file.parents
    archive = built["archive"]
    assert sorted(archive["label_map"].values()) == [f"opus-run-{i}" for i in range(1, 6)]
    assert archive["scores"][built["by_name"]["opus-run-1"]] == 0.83
    for original in archive["label_map"].values():
        assert not any(original in name for name in _all_names(built["dir"]))


def test_label_order_is_a_seeded_shuffle(tmp_path: Path, fixture_root: Path) -> None:
    maps = {}
    for seed in (1, 1, 2):
        dest = tmp_path / f"s{seed}-{len(maps)}"
        maps.setdefault(seed, []).append(materialize(fixture_root / "quarterly_report", dest, seed=seed).label_map)
    assert maps[1][0] == maps[1][1]
    assert maps[1][0] != maps[2][0]


def test_zip_rollout_and_trace_file_land_in_place(materialized: dict) -> None:
    built = materialized["finance_workbook"]
    zipped = built["dir"] / "rollouts" / built["by_name"]["opus-run-5"]
    assert (zipped / "deliverables" / "model.xlsx").is_file()
    assert (zipped / "trajectory" / "trajectory.jsonl").is_file()
    traced = built["dir"] / "rollouts" / built["by_name"]["opus-run-4"]
    assert (traced / "trajectory" / "trace.jsonl").is_file()
    assert not (traced / "deliverables" / "trace.jsonl").exists()


def test_sidecars_exist_beside_binaries_and_are_not_deliverables(materialized: dict) -> None:
    built = materialized["quarterly_report"]
    rollout = built["dir"] / "rollouts" / built["by_name"]["w1"]
    sidecar = rollout / "deliverables" / "report.docx.view.txt"
    assert "Year-over-year revenue growth: 20.0%" in sidecar.read_text()
    assert [p.name for p in deliverable_files(rollout)] == ["report.docx", "report.md"]
    assert f"rollouts/{rollout.name}/deliverables/report.docx.view.txt" in built["report"].views


def test_extra_and_replaced_exclude_patterns(tmp_path: Path) -> None:
    source = _small_source(tmp_path)
    (source / "key_values.csv").write_text("total\n3\n")
    (source / "golden.md").write_text("Total: 3\n")
    report = materialize(source, tmp_path / "a", extra_exclude_patterns=["key_*"])
    assert dict(report.left_out)["key_values.csv"] == "answer-key pattern 'key_*'"
    replaced = materialize(source, tmp_path / "b", exclude_patterns=["key_*"])
    # golden.md is no longer an answer-key pattern, but an unknown top-level file is still left out
    assert dict(replaced.left_out)["golden.md"] == "not part of the source layout"


def test_grader_output_inside_a_rollout_is_left_out(tmp_path: Path) -> None:
    source = _small_source(tmp_path)
    (source / "rollouts" / "run-0" / "reward.txt").write_text("1\n")
    report = materialize(source, tmp_path / "task")
    assert ("rollouts/run-0/reward.txt", "grader output pattern 'reward.txt'") in report.left_out
    assert "reward.txt" not in _all_names(tmp_path / "task")


def test_zip_slip_member_is_rejected_and_nothing_is_left_behind(tmp_path: Path) -> None:
    source = _small_source(tmp_path)
    with zipfile.ZipFile(source / "rollouts" / "evil.zip", "w") as archive:
        archive.writestr("answer.md", "Total: 3\n")
        archive.writestr("../../outside.txt", "gotcha")
    with pytest.raises(UserError, match=r"unsafe file name '\.\./\.\./outside\.txt'"):
        materialize(source, tmp_path / "task")
    assert not (tmp_path / "task").exists()
    assert not list(tmp_path.rglob("outside.txt"))


def test_backslash_traversal_file_name_is_rejected(tmp_path: Path) -> None:
    source = _small_source(tmp_path)
    (source / "rollouts" / "run-1" / "..\\..\\evil.txt").write_text("x")
    with pytest.raises(UserError, match="unsafe file name"):
        materialize(source, tmp_path / "task")


def test_symlink_outside_the_source_is_rejected(tmp_path: Path) -> None:
    source = _small_source(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("archived score 0.9")
    os.symlink(secret, source / "rollouts" / "run-0" / "notes.txt")
    with pytest.raises(UserError, match="points outside the source folder"):
        materialize(source, tmp_path / "task")


def test_symlink_inside_the_source_is_copied_as_a_file(tmp_path: Path) -> None:
    source = _small_source(tmp_path)
    os.symlink(source / "inputs" / "numbers.csv", source / "rollouts" / "run-0" / "numbers.csv")
    materialize(source, tmp_path / "task", seed=0)
    copies = list((tmp_path / "task" / "rollouts").rglob("numbers.csv"))
    assert len(copies) == 1 and not copies[0].is_symlink()
    assert copies[0].read_text() == "n\n1\n2\n"


def test_corrupt_xlsx_gets_an_unreadable_sidecar_and_a_warning(tmp_path: Path) -> None:
    source = _small_source(tmp_path)
    (source / "rollouts" / "run-0" / "model.xlsx").write_bytes(b"PK\x03\x04 truncated")
    report = materialize(source, tmp_path / "task")
    sidecar = next((tmp_path / "task").rglob("model.xlsx.view.txt"))
    assert "could not be read" in sidecar.read_text()
    assert any("model.xlsx could not be read" in w for w in report.warnings)


def test_single_rollout_is_allowed_with_a_warning(tmp_path: Path) -> None:
    report = materialize(_small_source(tmp_path, rollouts=1), tmp_path / "task")
    assert list(report.label_map) == ["r01"]
    assert any("only one rollout" in w for w in report.warnings)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda s: (s / "task.md").unlink(), "has no task description"),
        (lambda s: shutil.rmtree(s / "rollouts"), "has no rollouts/ folder"),
        (lambda s: [shutil.rmtree(p) for p in (s / "rollouts").iterdir()], "holds no rollouts"),
    ],
)
def test_bad_sources_fail_with_one_clear_sentence(tmp_path: Path, damage, message: str) -> None:
    source = _small_source(tmp_path)
    damage(source)
    with pytest.raises(UserError, match=message):
        materialize(source, tmp_path / "task")


def test_destination_must_be_new_and_outside_the_source(tmp_path: Path) -> None:
    source = _small_source(tmp_path)
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "keep.txt").write_text("mine")
    with pytest.raises(UserError, match="already exists and is not empty"):
        materialize(source, occupied)
    assert (occupied / "keep.txt").read_text() == "mine"
    with pytest.raises(UserError, match="inside the source folder"):
        materialize(source, source / "task")
    with pytest.raises(UserError, match="inside the task folder"):
        materialize(source, tmp_path / "task", archive_dir=tmp_path / "task" / "archive")


def test_scores_for_unknown_rollouts_are_reported(tmp_path: Path) -> None:
    source = _small_source(tmp_path)
    (source / "scores.json").write_text(json.dumps({"run-0": 1.0, "run-9": 0.0}))
    report = materialize(source, tmp_path / "task")
    archive = json.loads(Path(report.archive_file).read_text())
    assert sorted(v for v in archive["scores"].values() if v is not None) == [1.0]
    assert any("run-9" in w for w in report.warnings)


def test_linked_inputs_folder_outside_the_source_is_rejected(tmp_path: Path) -> None:
    source = _small_source(tmp_path)
    elsewhere = tmp_path / "data_root"
    elsewhere.mkdir()
    (elsewhere / "answers.csv").write_text("total\n3\n")
    os.symlink(elsewhere, source / "workspace")
    with pytest.raises(UserError, match="points outside the source folder"):
        materialize(source, tmp_path / "task")


def test_spec_folder_is_kept_without_its_answer_keys_and_inputs_get_views(tmp_path: Path) -> None:
    source = _small_source(tmp_path)
    (source / "spec").mkdir()
    (source / "spec" / "style.md").write_text("Use two decimals.\n")
    (source / "spec" / "golden_answer.md").write_text("Total: 3\n")
    (source / "inputs" / "budget.xlsx").write_bytes(b"not a workbook")
    report = materialize(source, tmp_path / "task")
    spec = tmp_path / "task" / "spec"
    assert sorted(p.name for p in spec.iterdir()) == ["style.md", "task.md"]
    assert ("spec/golden_answer.md", "answer-key pattern 'golden*'") in report.left_out
    assert (tmp_path / "task" / "workspace" / "budget.xlsx.view.txt").is_file()
    assert "workspace/budget.xlsx.view.txt" in report.views


def test_layout_names_are_never_treated_as_answer_keys(tmp_path: Path) -> None:
    source = _small_source(tmp_path)
    report = materialize(source, tmp_path / "task", extra_exclude_patterns=["input*", "rollout*"])
    assert report.left_out == []
    assert (tmp_path / "task" / "workspace" / "numbers.csv").is_file()
