"""Shared fixtures for the harness tests: the committed fixture tasks, materialised once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from veriscale.harness.materialize import materialize

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
