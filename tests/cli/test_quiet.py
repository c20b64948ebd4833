"""``--quiet`` (``$VERISCALE_QUIET``, config ``output.quiet``): no progress and no informational note on
stderr, whatever the command; errors still print their one sentence and exit non-zero, and the notice
that verdicts come from the weak embedded model is never hidden."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.scripted_progress import CLI_MAIN
from veriscale.cli import app, common
from veriscale.cli import options as o
from veriscale.cli import settings as cli_settings
from veriscale.models.weak_judge import EMBEDDED_NOTICE

REPO = Path(__file__).resolve().parents[2]
TRAJECTORY = REPO / "examples" / "progress" / "fail_trajectory.json"
MAIN = CLI_MAIN  # veriscale's own entry point with the scripted progress double registered
NOTICE_START = str(EMBEDDED_NOTICE).split(":")[0]


@pytest.fixture()
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty config file of this test's own, and no $VERISCALE_QUIET."""
    path = tmp_path / "config.toml"
    path.write_text("")
    monkeypatch.setenv("VERISCALE_CONFIG", str(path))
    monkeypatch.delenv("VERISCALE_QUIET", raising=False)
    yield path
    monkeypatch.delenv("VERISCALE_QUIET", raising=False)
    path.write_text("")
    cli_settings.configure(None, {})  # later tests start loud


def _track(tmp_path: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environ = {key: value for key, value in os.environ.items() if key != "VERISCALE_QUIET"}
    environ.update({"PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), **(env or {})})
    return subprocess.run([sys.executable, "-c", MAIN, "track", str(TRAJECTORY), "--every", "1", "--json",
                           "--model", "scripted-progress", "--store", str(tmp_path / "s.sqlite3"), *extra],
                          capture_output=True, text=True, env=environ, cwd=tmp_path, timeout=300, check=False)


@pytest.mark.parametrize(("args", "env"), [(["--quiet"], None), ([], {"VERISCALE_QUIET": "yes"})],
                         ids=["flag", "environment"])
def test_quiet_track_prints_no_progress_lines_and_the_same_json(tmp_path: Path, args: list[str], env) -> None:
    loud = _track(tmp_path)
    assert loud.returncode == 0, loud.stderr
    assert any(line.startswith("progress:") for line in loud.stderr.splitlines())  # as before, without --quiet
    quiet = _track(tmp_path, *args, env=env)
    assert quiet.returncode == 0, quiet.stderr
    assert "progress:" not in quiet.stderr
    def curve(proc: subprocess.CompletedProcess) -> list[tuple[int, float]]:
        return [(p["step"], p["value"]) for p in json.loads(proc.stdout)["curves"][0]["points"]]

    assert curve(quiet) == curve(loud)  # the result is the same (the second run reads the cache)


@pytest.mark.parametrize("where", ["before", "after", "environment", "file"])
def test_quiet_is_one_setting_from_every_source(where: str, config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["settings", "--json"]
    if where == "before":
        args = ["--quiet", *args]
    elif where == "after":
        args = [*args, "--quiet"]
    elif where == "environment":
        monkeypatch.setenv("VERISCALE_QUIET", "on")
    else:
        config.write_text("[output]\nquiet = true\n")
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    row = next(r for r in json.loads(result.stdout)["settings"] if r["name"] == "quiet")
    origin = {"before": "--quiet", "after": "--quiet", "environment": "$VERISCALE_QUIET",
              "file": "config file output.quiet"}[where]
    assert (row["value"], row["origin"]) == ("on", origin)


def test_a_bad_quiet_value_is_one_sentence(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERISCALE_QUIET", "maybe")
    result = CliRunner().invoke(app, ["settings", "--json"])
    assert result.exit_code == 2 and "VERISCALE_QUIET" in result.output and "Traceback" not in result.output


def test_quiet_drops_the_config_files_note_but_not_an_error(config: Path, tmp_path: Path) -> None:
    config.write_text("colour = 'blue'\n")  # a key veriscale does not read: a note
    loud = CliRunner().invoke(app, ["settings", "--json"])
    assert loud.exit_code == 0 and "note:" in loud.stderr and "'colour'" in loud.stderr
    quiet = CliRunner().invoke(app, ["--quiet", "settings", "--json"])
    assert quiet.exit_code == 0 and quiet.stderr == ""
    missing = CliRunner().invoke(app, ["score", str(tmp_path / "no_task.md"), str(tmp_path / "no.md"), "--quiet",
                                       "--store", str(tmp_path / "s.sqlite3")])
    assert missing.exit_code != 0
    line = " ".join(missing.stderr.split())
    assert line.startswith("error: ") and "no_task.md" in line and "Traceback" not in missing.output


def test_quiet_hides_notes_and_progress_but_never_the_weak_model_notice(config: Path, capsys,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    cli_settings.configure(None, {"quiet": True})
    assert common.quiet()
    common.note("an informational note")
    with o.call_progress(5, "calls", True) as advance:
        for _ in range(5):
            advance()
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(o, "_NOTICE_SHOWN", False)
    monkeypatch.setattr(o, "load_backend", lambda uri: object())
    monkeypatch.setattr(o, "uses_embedded", lambda backend: True)
    o.open_model(cli_settings.current())
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith("note: ") and NOTICE_START in err
    cli_settings.configure(None, {})
    assert not common.quiet()
    common.note("an informational note")
    assert "an informational note" in capsys.readouterr().err


def test_the_help_says_what_quiet_keeps() -> None:
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "400", "TERM": "dumb"})
    text = " ".join(result.output.split())
    assert "--quiet" in text and "weak embedded model" in text and "Errors still print" in text


def test_quiet_is_read_by_every_command() -> None:
    assert all("quiet" in uses for uses in cli_settings.USES.values())


def test_quiet_harness_run_drops_its_progress_lines_but_says_the_jail_is_off(config: Path, tmp_path: Path) -> None:
    from tests.cli.test_json_schemas import HARNESS_FIXTURES, _pick_only_scripts
    from tests.support.scripted_chat import ScriptedChat
    from veriscale.cli.flags import cli_text
    from veriscale.harness.jail.sandbox import JAIL_OFF_MESSAGE
    from veriscale.harness.workspace.materialize import materialize
    from veriscale.models.registry import SCHEMES, register_backend

    materialize(HARNESS_FIXTURES / "quarterly_report", tmp_path / "quarterly_report", seed=11)
    saved = dict(SCHEMES)
    register_backend(("scripted-chat",), lambda _uri: ScriptedChat(_pick_only_scripts("r02")), forms=("scripted-chat",))
    try:
        said = {}
        for run_id, extra in (("loud", []), ("quiet", ["--quiet"])):
            result = CliRunner().invoke(app, ["harness", "run", str(tmp_path / "quarterly_report"), "--model",
                                              "scripted-chat", "--contract", "pick-only", "--no-jail", "--run-id",
                                              run_id, "--store", str(tmp_path / "s.sqlite3"), "--json", *extra])
            assert result.exit_code == 0, result.output
            assert json.loads(result.stdout)["tasks"][0]["outcome"] == "delivered"
            said[run_id] = " ".join(result.stderr.split())
    finally:
        SCHEMES.clear()
        SCHEMES.update(saved)
    jail_off = " ".join(cli_text(JAIL_OFF_MESSAGE).split()).split(":")[0]  # "jail is off (--no-jail)"
    assert "resolve started" in said["loud"]
    assert "started" not in said["quiet"] and "completed" not in said["quiet"]
    assert said["quiet"].startswith("warning: ") and said["quiet"].count(jail_off) == 1
