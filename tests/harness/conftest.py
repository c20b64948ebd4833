"""Shared fixtures for the harness tests: the committed fixture tasks, materialised once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness import jail_probe
from veriscale.harness.workspace.materialize import materialize

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "harness"
TASK_NAMES = ("finance_workbook", "data_cleanup", "quarterly_report")


@pytest.fixture(scope="session")
def fixture_root() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def materialized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Each fixture task materialised (seed 11): {name: {"dir", "report", "archive", "by_name"}}."""
    root = tmp_path_factory.mktemp("tasks")
    built = {}
    for name in TASK_NAMES:
        report = materialize(FIXTURES / name, root / name, seed=11)
        archive = json.loads((root / f"{name}.scores.json").read_text())
        by_name = {original: label for label, original in archive["label_map"].items()}
        built[name] = {"dir": root / name, "report": report, "archive": archive, "by_name": by_name}
    return built


@pytest.fixture()
def layout(tmp_path: Path) -> dict[str, Path]:
    """A data root with an answer key, a task with its archive beside it, and two sessions."""
    data_root = tmp_path / "data"
    data_root.mkdir()
    (data_root / "answers.json").write_text(jail_probe.ANSWER)
    tasks = tmp_path / "tasks"
    task = tasks / "t1"
    (task / "spec").mkdir(parents=True)
    (task / "spec" / "task.md").write_text(jail_probe.TASK_TEXT)
    (task / "workspace").mkdir()
    (task / "workspace" / "input.csv").write_text("year,revenue\n2024,100\n")
    (task / "rollouts" / "r01" / "deliverables").mkdir(parents=True)
    (task / "rollouts" / "r01" / "deliverables" / "report.md").write_text(jail_probe.EVIDENCE)
    (tasks / "t1.scores.json").write_text(jail_probe.ARCHIVED)
    (task / "sessions" / "other").mkdir(parents=True)
    (task / "sessions" / "other" / "notes.md").write_text(jail_probe.OTHER_NOTES)
    return {
        "task": task,
        "answers": data_root / "answers.json",
        "archive": tasks / "t1.scores.json",
        "other_notes": task / "sessions" / "other" / "notes.md",
        "report": task / "rollouts" / "r01" / "deliverables" / "report.md",
        "out": task / "sessions" / "s1",
    }
