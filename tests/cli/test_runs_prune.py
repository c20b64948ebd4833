"""``veriscale runs prune`` and ``runs vacuum``, run for real in process (typer's CliRunner) on a store
whose runs and calls were recorded through the real APIs (the scripted test double behind the gateway)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from tests.support.scripted_model import ScriptedScoreModel
from veriscale import schemas
from veriscale.cli import app
from veriscale.engine.run_scope import recorded_run
from veriscale.engine.store import Store
from veriscale.engine.sync_facade import CallExecutor, PlannedCall
from veriscale.models.base import Message, ScoreRequest


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def _calls(*texts: str) -> list[PlannedCall]:
    return [PlannedCall(ScoreRequest(messages=(Message("user", f"## Response\n{t}\n## Criterion\nc"),),
                                     prefill="Score: ", labels=("A", "B"))) for t in texts]


@pytest.fixture()
def store_path(tmp_path: Path) -> Path:
    """A store with a failed score run (two calls, one shared) and an ok select run."""
    path = tmp_path / "s.sqlite3"
    store = Store.open(path)
    ex = CallExecutor(ScriptedScoreModel(), store, prompt_version="t")
    with recorded_run(store, "score", "scripted", {}) as run:
        ex.run(_calls("shared", "x" * 5000))
        run.finish("failed", {"error": "it went wrong"})
    with recorded_run(store, "select", "scripted", {}):
        ex.run(_calls("shared", "kept"))
    store.close()
    return path


def _one_sentence(result) -> str:
    text = result.output.strip()
    assert result.exit_code == 2, result.output
    assert "\n" not in text and "Traceback" not in text, text
    return text


def test_a_bare_prune_is_refused_in_one_sentence_naming_the_fix(store_path: Path) -> None:
    text = _one_sentence(invoke("runs", "prune", "--store", str(store_path)))
    assert "--older-than 30d" in text and "--status" in text
    with_vacuum = _one_sentence(invoke("runs", "prune", "--vacuum", "--dry-run", "--store", str(store_path)))
    assert with_vacuum == text
    assert len(Store.open(store_path).runs()) == 2


@pytest.mark.parametrize("bad", ["abc", "30x", "-3d", "3 days"])
def test_a_bad_duration_is_refused_in_one_sentence(store_path: Path, bad: str) -> None:
    text = _one_sentence(invoke("runs", "prune", "--older-than", bad, "--store", str(store_path)))
    assert "--older-than" in text and "is not a duration" in text and "30d" in text


def test_status_running_is_refused(store_path: Path) -> None:
    text = _one_sentence(invoke("runs", "prune", "--status", "running", "--store", str(store_path)))
    assert "never pruned" in text


def test_prune_json_matches_its_schema_and_keeps_what_the_kept_run_used(store_path: Path) -> None:
    dry = invoke("runs", "prune", "--status", "failed", "--dry-run", "--json", "--store", str(store_path))
    assert dry.exit_code == 0, dry.output
    doc = json.loads(dry.stdout)
    assert not list(Draft202012Validator(schemas.load("runs-prune")).iter_errors(doc))
    assert doc["schema"] == "veriscale.runs-prune/1" and doc["dry_run"] is True
    assert (doc["runs"], doc["calls"], doc["links"]) == (1, 1, 2)
    assert len(Store.open(store_path).runs()) == 2  # nothing changed

    real = invoke("runs", "prune", "--status", "failed", "--kind", "score", "--vacuum", "--json",
                  "--store", str(store_path))
    assert real.exit_code == 0, real.output
    doc = json.loads(real.stdout)
    assert not list(Draft202012Validator(schemas.load("runs-prune")).iter_errors(doc))
    assert (doc["dry_run"], doc["runs"], doc["calls"]) == (False, 1, 1)
    assert doc["vacuum"]["bytes_after"] <= doc["vacuum"]["bytes_before"]
    store = Store.open(store_path)
    (kept,) = store.runs()
    assert kept.command == "select"
    assert store.count_calls() == 2 and all(store.call(c["key"]) for c in store.run_calls(kept.id))


def test_prune_and_vacuum_text_output(store_path: Path) -> None:
    dry = invoke("runs", "prune", "--older-than", "0", "--kind", "select", "--dry-run", "--store", str(store_path))
    assert dry.exit_code == 0, dry.output
    assert "would remove 1 run," in dry.output
    real = invoke("runs", "prune", "--older-than", "0s", "--status", "failed", "--store", str(store_path))
    assert real.exit_code == 0, real.output
    assert "removed 1 run," in real.output and "runs vacuum" in real.output
    vac = invoke("runs", "vacuum", "--store", str(store_path))
    assert vac.exit_code == 0 and "vacuumed" in vac.output, vac.output
    vac_json = invoke("runs", "vacuum", "--json", "--store", str(store_path))
    doc = json.loads(vac_json.stdout)
    assert not list(Draft202012Validator(schemas.load("runs-vacuum")).iter_errors(doc))
    assert doc["schema"] == "veriscale.runs-vacuum/1"
