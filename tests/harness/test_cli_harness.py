"""`veriscale harness materialize|claims` through typer: exit codes, JSON, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from veriscale.cli.harness import register

app = typer.Typer()
register(app)


@app.callback()
def _root() -> None:
    """Keep `harness` as a sub-command even when it is the only one."""


runner = CliRunner()


def test_materialize_then_claims_as_json(tmp_path: Path, fixture_root: Path) -> None:
    task = tmp_path / "report"
    made = runner.invoke(app, ["harness", "materialize", str(fixture_root / "quarterly_report"), str(task),
                               "--seed", "5", "-x", "kpi_*", "--json"])
    assert made.exit_code == 0, made.output
    report = json.loads(made.stdout)
    assert {entry["path"] for entry in report["left_out"]} >= {"solution/", "task.toml", "scores.json"}
    assert (tmp_path / "report.scores.json").is_file()

    claimed = runner.invoke(app, ["harness", "claims", str(task), "--json"])
    assert claimed.exit_code == 0, claimed.output
    payload = json.loads(claimed.stdout)
    assert payload["claims"]["counts"]["disputed"] >= 1
    assert payload["agenda"]["items"][0]["key"].endswith("year-over-year revenue growth (%)")
    assert Path(payload["files"]["claims"]) == task / "claims" / "claims.json"


def test_claims_table_output(tmp_path: Path, fixture_root: Path) -> None:
    task = tmp_path / "fin"
    assert runner.invoke(app, ["harness", "materialize", str(fixture_root / "finance_workbook"), str(task)]).exit_code == 0
    result = runner.invoke(app, ["harness", "claims", str(task), "--out", str(tmp_path / "cm"), "--top", "3"])
    assert result.exit_code == 0, result.output
    assert "disputed" in result.stdout and "Summary!B5" in result.stdout
    assert (tmp_path / "cm" / "agenda.json").is_file()


def test_bad_input_is_one_sentence_and_exit_code_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["harness", "claims", str(tmp_path / "missing")])
    assert result.exit_code == 2
    assert "does not exist" in result.output and "Traceback" not in result.output
    result = runner.invoke(app, ["harness", "materialize", str(tmp_path / "nope"), str(tmp_path / "t")])
    assert result.exit_code == 2
    assert "source folder" in result.output


HOSTILE = "\x1b]0;owned\x07\x1b]52;c;aGVsbG8=\x07\x1b[2J[link=http://evil.example]click[/link]"


def test_rollout_text_reaches_the_terminal_and_claims_md_only_escaped(tmp_path: Path, fixture_root: Path) -> None:
    """Issue 30: a window title, an OSC 52 clipboard write, a screen clear and Rich link markup in a
    rollout's CSV cell reached the user's terminal through `harness claims`, and claims.md kept the ESC bytes."""
    task = tmp_path / "cleanup"
    assert runner.invoke(app, ["harness", "materialize", str(fixture_root / "data_cleanup"), str(task)]).exit_code == 0
    for n, csv in enumerate(sorted((task / "rollouts").glob("*/deliverables/*.csv"))):
        lines = csv.read_text().splitlines()
        cells = lines[1].split(",")
        cells[1] = f"Name{n} {HOSTILE}"  # a different name in each rollout: a disputed claim, shown in the table
        csv.write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n")
    result = runner.invoke(app, ["harness", "claims", str(task), "--top", "50"], color=True)
    assert result.exit_code == 0, result.output
    assert "\x1b]" not in result.stdout and "\x1b[2J" not in result.stdout  # no OSC (title, clipboard) and no clear
    assert "[link=http://evil.example]" in result.stdout.replace("\n", "").replace(" ", "").replace("│", "") or \
        "evil.example" not in result.stdout  # markup shown as text, never turned into a link
    md = (task / "claims" / "claims.md").read_text()
    assert "\x1b" not in md and "\x07" not in md
    assert "\\x1b" in md  # the escape is there to read, as text
