"""Progress bench logic: first-error detection and F1, checkpoint spacing, data loading, the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.scripted_progress import ScriptedProgressModel
from veriscale.bench.progress import (f1_score, first_error_metrics, load_progress_data, plan_progress,
                                      predict_first_error, run_progress, spaced_checkpoints)
from veriscale.data.model import Candidate
from veriscale.errors import UserError
from veriscale.progress.progress_judge import ProgressJudge

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "progress"


def test_detectors_find_the_first_drop_or_low_level() -> None:
    curve = [0.5, 0.6, 0.7, 0.4, 0.8]
    assert predict_first_error(curve, "drop", 0.2) == 3
    assert predict_first_error(curve, "drop", 0.35) == -1
    assert predict_first_error(curve, "level", 0.55) == 0
    assert predict_first_error([None, 0.6, 0.2], "drop", 0.1) == 2


def test_f1_is_processbench_harmonic_mean() -> None:
    labels = [2, 1, -1, -1]
    scores = f1_score(labels, [2, 0, -1, 3])  # 1 of 2 erroneous exact, 1 of 2 correct kept
    assert scores == {"f1": pytest.approx(0.5), "accuracy_erroneous": 0.5, "accuracy_correct": 0.5}
    assert f1_score([1, -1], [1, -1])["f1"] == 1.0
    assert f1_score([-1, -1], [-1, -1])["f1"] is None  # no erroneous solution: F1 undefined, not 0


def test_threshold_is_tuned_on_one_half_and_reported_on_the_other() -> None:
    # wrong solutions drop by 0.3 at their first error; correct ones wobble by 0.05
    labels = [2, 1, 3, 2, -1, -1, -1, -1]
    curves = [[0.6, 0.7, 0.4, 0.5], [0.5, 0.2, 0.3], [0.4, 0.5, 0.6, 0.3], [0.6, 0.7, 0.4],
              [0.4, 0.45, 0.4, 0.5], [0.5, 0.55], [0.3, 0.4, 0.35], [0.6, 0.7, 0.8]]
    m = first_error_metrics(labels, curves, seed=0)
    assert m["tuned_on"] + m["reported_on"] == 8 and m["first_error_f1"] == 1.0
    assert m["rule"] == "drop" and 0.05 <= m["threshold"] < 0.3


def test_spaced_checkpoints() -> None:
    assert spaced_checkpoints(5) == [1, 2, 3, 4, 5]
    assert spaced_checkpoints(100) == [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    assert spaced_checkpoints(23, 4)[-1] == 23 and len(spaced_checkpoints(23, 4)) == 4


def _solutions(tmp_path: Path) -> Path:
    rows = [{"id": f"s{i}", "problem": "Add 2 and 2, then double it.",
             "steps": ["UP 2 + 2 = 4", "UP 4 * 2 = 8" if i % 2 else "DOWN DOWN 4 * 2 = 6", "UP the answer"],
             "label": -1 if i % 2 else 1} for i in range(8)]
    path = tmp_path / "solutions.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_first_error_bench_end_to_end_with_the_test_double(tmp_path: Path) -> None:
    data = load_progress_data(_solutions(tmp_path), limit=0)
    assert data.kind == "first_error" and len(data.items) == 8
    judge = ProgressJudge(ScriptedProgressModel())
    plans = plan_progress(judge, data)
    assert [p.checkpoints for p in plans] == [[1, 2, 3]] * 8
    report = run_progress(judge, data, plans)
    assert report.metrics["continuous"]["first_error_f1"] == 1.0
    assert report.metrics["discrete"]["accuracy_correct"] == 1.0 and report.usage["model_calls"] == 24
    assert "first_error" not in json.dumps([c.request.to_dict() for p in plans for c in p.calls])


def test_voc_bench_on_the_bundled_runs() -> None:
    data = load_progress_data(EXAMPLES)
    assert data.kind == "voc" and sorted(c.labels["reward"] for c in data.items) == [0, 1]
    judge = ProgressJudge(ScriptedProgressModel())
    plans = plan_progress(judge, data)
    assert all(len(p.checkpoints) == 10 and p.checkpoints[-1] == p.n_steps for p in plans)
    report = run_progress(judge, data, plans)
    by = report.metrics["continuous"]["voc_by_outcome"]
    assert by["success"]["n"] + by["success"]["undefined"] == 1 and by["failure"]["n"] + by["failure"]["undefined"] == 1


def test_bad_progress_data_is_named(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        load_progress_data(tmp_path / "nope.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"problem": "p", "steps": ["a"], "label": 4}) + "\n")
    with pytest.raises(UserError, match="label 4 but 1 steps"):
        load_progress_data(bad)


def test_voc_bench_reads_outcomes_under_every_label_key() -> None:
    from veriscale.bench.progress import ProgressData
    from veriscale.data.model import Step, Task, Trajectory

    def run(ident: str, texts: list[str], passed: bool) -> Candidate:
        return Candidate(id=ident, trajectory=Trajectory([Step(role="agent", text=t) for t in texts]),
                         task=Task("t", id="t"), labels={"passed": passed})

    data = ProgressData("voc", "mem", [run("a", ["UP", "UP", "UP"], True), run("b", ["UP", "DOWN", "x"], False)], 1)
    judge = ProgressJudge(ScriptedProgressModel())
    by = run_progress(judge, data, plan_progress(judge, data)).metrics["continuous"]["voc_by_outcome"]
    assert by["success"]["mean_voc"] == pytest.approx(1.0) and by["failure"]["n"] == 1
