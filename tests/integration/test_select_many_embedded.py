"""``select-many`` end to end on the embedded model over the dev Terminal-Bench pool (two tasks):
each task gets a pick among its own runs, and a rerun decides nothing again and calls no model."""

from __future__ import annotations

import json
from pathlib import Path

from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from tests.data.dev_data_paths import TERMINAL_BENCH
from veriscale import schemas
from veriscale.cli import app
from veriscale.data.pool import load_pool


def test_two_terminal_bench_tasks_are_decided_on_the_embedded_model_and_a_rerun_resumes(tmp_path: Path) -> None:
    out, store = tmp_path / "picks.jsonl", ["--store", str(tmp_path / "s.sqlite3")]
    args = ["select-many", str(TERMINAL_BENCH), "-o", str(out), "--limit", "2", "-k", "1", *store, "--json"]
    runner = CliRunner()
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["decided"] == 2
    pool = load_pool([TERMINAL_BENCH])
    check = Draft202012Validator(schemas.load("pick"))
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["task"] for line in lines] == list(pool)[:2]
    for line in lines:
        check.validate(line)
        runs = {c.id for c in pool[line["task"]].candidates}
        assert line["pick"] in runs and set(line["ranking"]) == runs and line["cost"]["model_calls"] > 0

    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    summary = json.loads(again.stdout)
    assert (summary["decided"], summary["skipped"], summary["model_calls"]) == (0, 2, 0)
    assert out.read_text().splitlines() == [json.dumps(line, ensure_ascii=False) for line in lines]
