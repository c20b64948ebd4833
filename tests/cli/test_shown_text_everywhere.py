"""Issue 30: no command lets session, rollout, candidate or model text drive the terminal.

Text a run controls (a candidate's file name and so its id, the reason that quotes it, a rollout's
file names, a criterion's name, a trajectory's id, a skill's description, a note) is fed with an
OSC 52 clipboard write, a window title, a screen clear and Rich markup (a ``[link=…]`` and
``[bold red]``). Each command runs for real (typer's CliRunner, the scripted test doubles as the
model); the raw ESC byte must never reach the output, and the markup must be printed as it reads.
``--json`` stays JSON (``json.dumps`` writes ESC as ``\\u001b``; C1 controls are escaped too).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from tests.support.scripted_model import ScriptedScoreModel, registered_scheme
from tests.support.scripted_progress import ScriptedProgressModel
from veriscale.cli import app, common

OSC52, TITLE, CLEAR = "\x1b]52;c;aGk=\x07", "\x1b]0;pwned\x07", "\x1b[2J"
HOSTILE = f"{OSC52}{TITLE}{CLEAR}[link=file:///etc/passwd]x[/link][bold red]R\x9b2J"
NAME = HOSTILE.replace("file:///etc/passwd", "file:etc").replace("[/link]", "")  # no '/' in a file name
EX = Path(__file__).resolve().parents[2] / "examples" / "progress"


@pytest.fixture()
def scripted():
    with registered_scheme("scripted", lambda uri: ScriptedScoreModel(), ("scripted",)), \
            registered_scheme("scriptedp", lambda uri: ScriptedProgressModel(), ("scriptedp",)):
        yield


def invoke(*args: str):
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


def flat(text: str) -> str:
    """The output without table rules and wrapping, to look for a whole string."""
    return "".join(ch for ch in text if ch not in " \n│┃┏┓┗┛━─┡┩└┘┌┐╇┳┻╋┼├┤")


def assert_shown_as_text(output: str, *markup: str) -> None:
    assert "\x1b" not in output and "\x07" not in output and "\x9b" not in output, repr(output[:2000])
    assert flat("\\x1b]52;c;aGk=\\x07") in flat(output)  # the escape is there to read, as text
    for literal in markup:
        assert flat(literal) in flat(output), (literal, output[:2000])


@pytest.fixture()
def pair(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "task.md").write_text("Answer the question.\n")
    hostile = tmp_path / f"cand{NAME}.md"
    hostile.write_text(f"GOOD answer {HOSTILE}\n")
    (tmp_path / "b.md").write_text("a weaker answer\n")
    criteria = tmp_path / "criteria.md"
    criteria.write_text(f"## Correct{HOSTILE}\n\nIs it right?\n\n## Complete\n\nIs it whole?\n")
    return {"task": tmp_path / "task.md", "a": hostile, "b": tmp_path / "b.md", "criteria": criteria,
            "store": tmp_path / "runs.sqlite3"}


def test_select_shows_candidate_ids_reason_and_pick_as_text(scripted, pair) -> None:
    result = invoke("select", "--task", str(pair["task"]), str(pair["a"]), str(pair["b"]), "--model", "scripted",
                    "--store", str(pair["store"]))
    assert result.exit_code == 0, result.output
    assert_shown_as_text(result.output, "[link=file:etc]x[bold red]R")
    assert "picked: cand\\x1b]52" in result.stdout and "reason: cand\\x1b]52" in result.stdout

    listed = invoke("runs", "list", "--store", str(pair["store"]))  # the run's summary names the pick
    assert listed.exit_code == 0, listed.output
    assert "\x1b" not in listed.output and "\x07" not in listed.output

    as_json = invoke("select", "--task", str(pair["task"]), str(pair["a"]), str(pair["b"]), "--model", "scripted",
                     "--store", str(pair["store"]), "--json")
    assert as_json.exit_code == 0, as_json.output
    assert "\x1b" not in as_json.stdout and "\x9b" not in as_json.stdout  # written as \u001b, \u009b
    payload = json.loads(as_json.stdout)
    assert payload["best"]["id"] == f"cand{NAME}"  # the JSON keeps the real text

    shown = invoke("runs", "show", str(payload["run_id"]), "--store", str(pair["store"]))
    assert shown.exit_code == 0 and "\x1b" not in shown.stdout and "\x9b" not in shown.stdout
    json.loads(shown.stdout)


@pytest.mark.parametrize("command", ["score", "compare"])
def test_score_and_compare_show_criterion_names_as_text(scripted, pair, command: str) -> None:
    candidates = [str(pair["a"])] if command == "score" else [str(pair["a"]), str(pair["b"])]
    result = invoke(command, str(pair["task"]), *candidates, "--criteria", str(pair["criteria"]),
                    "--model", "scripted", "--store", str(pair["store"]))
    assert result.exit_code == 0, result.output
    assert_shown_as_text(result.output, "[link=file:///etc/passwd]x[/link][bold red]R")


def test_harness_materialize_shows_rollout_file_names_as_text(tmp_path: Path) -> None:
    source = tmp_path / "src"
    (source / "inputs").mkdir(parents=True)
    (source / "task.md").write_text("Sum.\n")
    (source / "inputs" / "n.csv").write_text("n\n1\n")
    for i in range(2):
        run = source / "rollouts" / f"run-{i}"
        run.mkdir(parents=True)
        (run / "answer.md").write_text(f"Total {i}\n")
        (run / f"grader{NAME}.txt").write_text("0.5\n")  # a grader output: left out, and its name shown
    result = invoke("harness", "materialize", str(source), str(tmp_path / "task"))
    assert result.exit_code == 0, result.output
    assert_shown_as_text(result.output, "[link=file:etc]x[bold red]R")


def test_harness_skills_list_and_show_print_skill_text_as_text(tmp_path: Path) -> None:
    skill = tmp_path / "skills" / "evidence-hostile"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: evidence-hostile\n"
        f"description: Reads {HOSTILE}\nphase: evidence\napplies-to: [\"*.md\"]\n---\n"
        f"# Hostile\n\nbody {HOSTILE}\nsecond line\n")
    listed = invoke("harness", "skills", "list", "--skills-dir", str(tmp_path / "skills"))
    assert listed.exit_code == 0, listed.output
    assert_shown_as_text(listed.output, "[link=file:///etc/passwd]x[/link][bold red]R")
    shown = invoke("harness", "skills", "show", "evidence-hostile", "--skills-dir", str(tmp_path / "skills"))
    assert shown.exit_code == 0, shown.output
    assert_shown_as_text(shown.output, "[link=file:///etc/passwd]x[/link][bold red]R")
    assert "\nsecond line" in shown.stdout  # a block keeps its lines


def test_track_shows_the_trajectory_id_as_text(scripted, tmp_path: Path) -> None:
    data = json.loads((EX / "success_trajectory.json").read_text())
    data["trial_id"] = data["trial_name"] = data["task_name"] = "T" + HOSTILE
    traj = tmp_path / "traj.json"
    traj.write_text(json.dumps(data))
    result = invoke("track", str(traj), "--checkpoints", "2,4,6", "--model", "scriptedp",
                    "--store", str(tmp_path / "s.sqlite3"))
    assert result.exit_code == 0, result.output
    assert_shown_as_text(result.output, "[link=file:///etc/passwd]x[/link][bold red]R")


def test_a_note_quoting_run_text_is_shown_as_text(monkeypatch) -> None:
    sink = io.StringIO()
    monkeypatch.setattr(common, "err_console", Console(file=sink, force_terminal=True, width=400))
    common.note(f"candidate '{HOSTILE}' was skipped")
    out = sink.getvalue()
    # a terminal console styles the label (its own ESC sequences); nothing of the note's own text is live
    for raw in (OSC52, TITLE, CLEAR, "\x9b", "\x1b]8;"):
        assert raw not in out, repr(out)
    assert "[link=file:///etc/passwd]x[/link][bold red]R" in out and "\\x1b]0;pwned\\x07" in out
