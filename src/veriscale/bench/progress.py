"""Progress benches: VOC of successful vs failed runs, and first-error detection from the curve.

    data = load_progress_data("terminal_bench_2.1_trials.jsonl.gz", limit=4, seed=0)
    data.kind                               # 'voc' (runs with an outcome) or 'first_error' (step labels)
    plans = plan_progress(judge, data)      # every checkpoint's calls, before any is sent
    report = run_progress(judge, data, plans)
    report.metrics["continuous"]["voc_by_outcome"], report.metrics["discrete"]["first_error_f1"]

VOC data: labelled runs (any importer format, or a folder of them); by default only tasks whose
runs disagree, ``limit`` tasks of them, at most ``max_checkpoints`` evenly spaced checkpoints per
run. First-error data (ProcessBench's shape, ``first_error`` labels): every step is a
checkpoint; the detector (a drop below the best so far, or a level below a threshold) and its
threshold are tuned on one seeded half and F1 is reported on the other. F1 is ProcessBench's:
the harmonic mean of the accuracy on erroneous solutions (exact first wrong step) and on
correct ones (no error found). Continuous and discrete scoring read the same calls: discrete
takes the most probable label instead of the expectation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from veriscale.bench.datasets import run_label, sample
from veriscale.data.model import Candidate
from veriscale.errors import UserError, setting
from veriscale.progress.curve import ProgressCurve
from veriscale.progress.progress_judge import ProgressJudge
from veriscale.progress.offline_track import TrackPlan, plan_track, run_track
from veriscale.progress.voc import value_order_correlation, voc_by_outcome

DEFAULT_LIMITS = {"voc": 4, "first_error": 40}  # tasks (voc) or solutions (first_error)
MAX_CHECKPOINTS = 10
THRESHOLDS = tuple(round(x, 3) for x in np.arange(0.0, 1.0001, 0.025))


@dataclass
class ProgressData:
    kind: str
    path: str
    items: list[Candidate]
    n_available: int
    notes: list[str] = field(default_factory=list)


@dataclass
class ProgressReport:
    kind: str
    data: str
    model: str
    n_items: int
    metrics: dict[str, Any]
    rows: list[dict[str, Any]]
    notes: list[str]
    usage: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _load_all(path: Path) -> list[Candidate]:
    from veriscale.data.importers import load_candidates

    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in (".json", ".jsonl", ".gz"))
        if not files:
            raise UserError(f"folder '{path}' holds no .json or .jsonl runs to bench")
        return [c for f in files for c in load_candidates([str(f)])]
    if not path.exists():
        raise UserError(f"progress data '{path}' does not exist: give labelled runs or step-labelled solutions")
    return load_candidates([str(path)])


def load_progress_data(path: str | Path, limit: int | None = None, seed: int = 0, all_tasks: bool = False) -> ProgressData:
    """The bench items of ``path`` and what kind of bench they make (see the module docstring)."""
    runs = [c for c in _load_all(Path(path)) if c.trajectory is not None and c.trajectory.steps]
    if not runs:
        raise UserError(f"'{path}' holds no run with steps: a progress bench scores trajectories")
    if all("first_error" in c.labels for c in runs):
        chosen = sample(runs, DEFAULT_LIMITS["first_error"] if limit is None else (limit or None), seed)
        return ProgressData("first_error", str(path), chosen, len(runs),
                            [f"subsample: {len(chosen)} of {len(runs)} step-labelled solutions with seed {seed}"])
    unlabelled = [c.id for c in runs if run_label(c) is None]
    if unlabelled:
        raise UserError(f"run {unlabelled[0]} has no outcome label (reward, resolved, success): a VOC bench "
                        "compares successful and failed runs")
    by_task: dict[str, list[Candidate]] = {}
    for c in runs:
        by_task.setdefault(c.task.id or c.task.text if c.task else c.id, []).append(c)
    groups = list(by_task.values())
    notes = []
    if not all_tasks and len(groups) > 1:
        eligible = [g for g in groups if len({run_label(c) > 0.5 for c in g}) > 1]
        notes.append(f"{len(eligible)} of {len(groups)} tasks have runs that disagree; only those are sampled "
                     f"({setting('all_tasks')} for every task)")
        groups = eligible or groups
    chosen_groups = sample(groups, DEFAULT_LIMITS["voc"] if limit is None else (limit or None), seed)
    items = [c for g in chosen_groups for c in g]
    n = len(chosen_groups)
    notes.append(f"subsample: {n} task{'s' if n != 1 else ''} ({len(items)} runs) of {len(by_task)} with seed {seed}")
    return ProgressData("voc", str(path), items, len(by_task), notes)


def spaced_checkpoints(n_steps: int, at_most: int = MAX_CHECKPOINTS) -> list[int]:
    """At most ``at_most`` checkpoints spread evenly over 1..n_steps, the last step included."""
    return sorted({max(1, round(i * n_steps / min(at_most, n_steps))) for i in range(1, min(at_most, n_steps) + 1)})


def plan_progress(judge: ProgressJudge, data: ProgressData, checkpoints: Sequence[int] | None = None,
                  max_checkpoints: int = MAX_CHECKPOINTS) -> list[TrackPlan]:
    plans = []
    for cand in data.items:
        n = len(cand.trajectory.steps)
        if data.kind == "first_error":
            chosen = list(range(1, n + 1))
        elif checkpoints is not None:
            chosen = [c for c in checkpoints if c <= n] or [n]
        else:
            chosen = spaced_checkpoints(n, max_checkpoints)
        plans.append(plan_track(None, cand, judge, chosen))
    return plans


def discrete_values(judge: ProgressJudge, curve: ProgressCurve) -> list[float | None]:
    return [None if p.value is None else judge.scale.argmax_value(p.label_probs) for p in curve.points]


def run_progress(judge: ProgressJudge, data: ProgressData, plans: Sequence[TrackPlan],
                 on_call: Callable[[Any], None] | None = None) -> ProgressReport:
    before = judge.usage.copy()
    curves = [run_track(plan, judge, progress=on_call) for plan in plans]
    series = {"continuous": [c.values() for c in curves], "discrete": [discrete_values(judge, c) for c in curves]}
    rows = [{"id": c.trajectory_id, "outcome": c.outcome, "steps": c.steps(), "continuous": s_c, "discrete": s_d}
            for c, s_c, s_d in zip(curves, series["continuous"], series["discrete"])]
    if data.kind == "voc":
        succeeded = [run_label(cand) > 0.5 for cand in data.items]
        metrics = {name: _voc_metrics(curves, values, succeeded) for name, values in series.items()}
        for row, curve in zip(rows, curves):
            row["voc"] = {name: value_order_correlation(v, curve.steps()) for name, v in
                          (("continuous", row["continuous"]), ("discrete", row["discrete"]))}
    else:
        metrics = {name: first_error_metrics([c.outcome for c in curves], values, seed=0)
                   for name, values in series.items()}
    notes = list(data.notes)
    failed = sum(1 for c in curves if c.failed)
    if failed:
        notes.append(f"{failed} run(s) have checkpoints whose model calls failed; they count as unscored")
    return ProgressReport(data.kind, data.path, judge.model.uri, len(curves), metrics, rows, notes,
                          judge.usage.since(before).to_dict())


def _voc_metrics(curves: list[ProgressCurve], values: list[list[float | None]],
                 succeeded: list[bool]) -> dict[str, Any]:
    vocs = [(value_order_correlation(v, c.steps()), ok) for c, v, ok in zip(curves, values, succeeded)]
    return {"voc_by_outcome": voc_by_outcome(vocs)}


def predict_first_error(values: Sequence[float | None], rule: str, threshold: float) -> int:
    """0-based index of the first wrong step the curve shows, or -1 (see the module docstring)."""
    best = None
    for index, value in enumerate(values):
        if value is None:
            continue
        if rule == "level" and value < threshold:
            return index
        if rule == "drop" and best is not None and value < best - threshold:
            return index
        best = value if best is None else max(best, value)
    return -1


def f1_score(labels: Sequence[int], predicted: Sequence[int]) -> dict[str, float | None]:
    """ProcessBench's F1: harmonic mean of the accuracy on erroneous and on correct solutions."""
    wrong = [(lab, pred) for lab, pred in zip(labels, predicted) if lab != -1]
    right = [pred for lab, pred in zip(labels, predicted) if lab == -1]
    acc_err = sum(lab == pred for lab, pred in wrong) / len(wrong) if wrong else None
    acc_cor = sum(pred == -1 for pred in right) / len(right) if right else None
    if acc_err is None or acc_cor is None:
        f1 = None
    else:
        f1 = 0.0 if acc_err + acc_cor == 0 else 2 * acc_err * acc_cor / (acc_err + acc_cor)
    return {"f1": f1, "accuracy_erroneous": acc_err, "accuracy_correct": acc_cor}


def first_error_metrics(labels: Sequence[int], curves: Sequence[Sequence[float | None]], seed: int = 0) -> dict[str, Any]:
    """Tune (rule, threshold) on one seeded half, report F1 on the other (halves split per class)."""
    rng = np.random.default_rng(seed)
    tune, test = [], []
    for wrong in (True, False):
        members = [i for i, lab in enumerate(labels) if (lab != -1) == wrong]
        shuffled = [members[j] for j in rng.permutation(len(members))]
        tune += shuffled[: (len(shuffled) + 1) // 2]
        test += shuffled[(len(shuffled) + 1) // 2:]
    tune, test = sorted(tune), sorted(test)

    def f1_on(indices: list[int], rule: str, threshold: float) -> float:
        scores = f1_score([labels[i] for i in indices], [predict_first_error(curves[i], rule, threshold) for i in indices])
        return -1.0 if scores["f1"] is None else scores["f1"]

    rule, threshold = max(((r, t) for r in ("drop", "level") for t in THRESHOLDS), key=lambda rt: f1_on(tune, *rt))
    held_out = f1_score([labels[i] for i in test], [predict_first_error(curves[i], rule, threshold) for i in test])
    return {"first_error_f1": held_out["f1"], **held_out, "rule": rule, "threshold": threshold,
            "tuned_on": len(tune), "reported_on": len(test), "tuning_f1": f1_on(tune, rule, threshold)}
