"""Every command and every setting's flag: the flag is applied (the command's settings read it back,
with the flag as its origin) or refused in one sentence naming the flag and the command; the same
global option is accepted before and after the sub-command, with the same result.

What a command reads is declared in ``veriscale.cli.settings.USES``; a flag the command declares
itself (``select --budget``, ``serve --proxy-schedule``) is one it reads by construction, checked
here against that table. The environment's and the config file's values of a setting a command does
not read are global and never refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from veriscale.cli import app
from veriscale.cli import settings as cli_settings
from veriscale.settings.registry import SPECS

#: arguments each command parses (never run here: the test stops it once its settings are resolved)
ARGS: dict[str, list[str]] = {
    "score": ["task.md", "a.md"],
    "compare": ["task.md", "a.md", "b.md"],
    "select": ["a.md", "b.md", "--task", "task.md"],
    "select-many": ["pool.jsonl", "-o", "picks.jsonl"],
    "bench": ["data.jsonl"],
    "track": ["a.md", "--task", "task.md"],
    "serve-reward": [],
    "serve": [],
    "mcp": [],
    "race": ["--task", "task.md"],
    "settings": [],
    "models check": ["embedded"],
    "models calibrate": ["embedded", "--pairs", "pairs.jsonl"],
    "runs list": [],
    "runs show": ["1"],
    "runs export": [],
    "runs cost": ["1"],
    "runs prune": ["--status", "failed", "--dry-run"],
    "runs vacuum": [],
    "harness materialize": ["src", "dest"],
    "harness claims": ["task"],
    "harness score": ["task"],
    "harness run": ["task", "--model", "embedded"],
    "harness evolve": ["score.json", "--out", "skills", "--model", "embedded"],
    "harness jail-run": ["task"],
    "harness skills list": [],
    "harness skills show": ["evidence-xlsx"],
    "criteria list": [],
    "criteria show": ["general"],
}
#: what follows an option (race's and jail-run's agent command comes after --)
TRAILING = {"race": ["--", "true"], "harness jail-run": ["--", "true"]}
VALUES: dict[str, str | None] = {  # a valid value unlike the default; None: a switch
    "model": "http://127.0.0.1:9/v1#m", "store": "reach.sqlite3", "concurrency": "7", "rpm": "600", "tpm": "900",
    "deadline_s": "33", "routing": "round_robin", "threads": "3", "max_input_mb": "8", "run_stale_s": "7.5",
    "image_max_mb": "3", "image_max_side": "512", "frames": "every:2",
    "store_wait_s": "9", "redact": "corp-[0-9]+", "redact_secrets": None, "injection_detect": "off",
    "injection_policy": "exclude", "injection_mitigation": "warn", "reward_group_scheme": "round_robin",
    "reward_length_control": "residual", "reward_answer_within": "150", "prices": "m=1/0.5/2",
    "budget": "calls=9", "zip_member_mb": "16", "zip_file_mb": "64", "zip_members": "99", "view_timeout_s": "5",
    "view_memory_mb": "512", "handback_max_files": "77", "handback_max_depth": "9", "joint": None,
    "model_mismatch": "note", "proxy_schedule": "early", "proxy_aliases": "fast=m*2", "proxy_budget": "calls=6",
    "quiet": None, "criteria_dir": "packs",
}
FLAGGED = [spec for spec in SPECS if spec.flag]


def _commands() -> dict[str, Any]:
    found: dict[str, Any] = {}

    def walk(cmd: Any, path: list[str]) -> None:
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                walk(sub, [*path, name])
        else:
            found[" ".join(path)] = cmd

    walk(typer.main.get_command(app), [])
    return found


COMMANDS = _commands()


def _own_flags(command: Any) -> set[str]:
    return {o for p in command.params if not getattr(p, "hidden", False)
            for o in [*getattr(p, "opts", []), *getattr(p, "secondary_opts", [])]}


def test_every_command_has_its_arguments_and_its_uses_here() -> None:
    assert set(ARGS) == set(COMMANDS) == set(cli_settings.USES)
    assert {spec.name for spec in FLAGGED} == set(VALUES)


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_a_command_reads_every_setting_it_has_a_flag_of(path: str) -> None:
    own = _own_flags(COMMANDS[path])
    assert {spec.name for spec in FLAGGED if spec.flag in own} <= cli_settings.uses(path)


@pytest.fixture()
def stop_when_resolved(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Commands stop (exit 0) right after their settings are resolved: nothing runs."""
    original = cli_settings.reconfigure

    def then_stop(path: Any, flags: Any) -> Any:
        original(path, flags)
        raise typer.Exit(0)

    monkeypatch.setattr(cli_settings, "reconfigure", then_stop)
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "config.toml"
    config.write_text("")
    monkeypatch.setenv("VERISCALE_CONFIG", str(config))
    for spec in SPECS:
        if spec.env and spec.name != "cache_dir":
            monkeypatch.delenv(spec.env, raising=False)


def _read_back(spec: Any) -> Any:
    """What ``veriscale settings --json`` shows for :data:`VALUES`' value of ``spec``."""
    value = VALUES[spec.name]
    if value is None:
        return "on" if spec.name in ("joint", "quiet") else False
    if spec.name in ("model", "redact"):
        return [value]
    typed = spec.check(spec.parse(value), spec.flag)
    return str(typed) if isinstance(typed, Path) else typed


def _given(spec: Any) -> list[str]:
    value = VALUES[spec.name]
    return [spec.flag] if value is None else [spec.flag, value]


@pytest.mark.parametrize("spec", FLAGGED, ids=[spec.name for spec in FLAGGED])
@pytest.mark.parametrize("path", sorted(ARGS))
def test_every_setting_flag_is_applied_or_refused(path: str, spec: Any, stop_when_resolved: None) -> None:
    if spec.flag in _own_flags(COMMANDS[path]):
        return  # the command's own option (checked above against USES)
    result = CliRunner().invoke(app, [*path.split(), *_given(spec), *ARGS[path], *TRAILING.get(path, [])])
    if spec.name in cli_settings.uses(path):
        assert result.exit_code == 0, result.output
        resolved = cli_settings.current()
        assert resolved.origin(spec.name) == spec.flag
        row = next(r for r in resolved.as_rows() if r["name"] == spec.name)
        assert row["value"] == _read_back(spec)
    else:
        assert result.exit_code == 2, result.output
        line = " ".join(result.output.split())
        assert f"{spec.flag} does not apply to {path}:" in line
        assert "Traceback" not in result.output


@pytest.mark.parametrize("path", ["race", "bench"])
def test_the_budget_is_refused_by_race_and_bench_but_its_environment_is_not(path: str,
                                                                             stop_when_resolved: None,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    refused = CliRunner().invoke(app, [path, "--budget", "calls=9", *ARGS[path], *TRAILING.get(path, [])])
    assert refused.exit_code == 2
    assert f"--budget does not apply to {path}: " in " ".join(refused.output.split())
    assert "select --budget" in " ".join(refused.output.split())
    monkeypatch.setenv("VERISCALE_BUDGET", "calls=9")  # global: not refused (the command stops at --rpm's resolution)
    taken = CliRunner().invoke(app, [path, "--rpm", "5", *ARGS[path], *TRAILING.get(path, [])])
    assert taken.exit_code == 0, taken.output
    assert cli_settings.current().origin("budget") == "$VERISCALE_BUDGET"


@pytest.mark.parametrize("option", [["--joint"], ["--rpm", "600"]])
@pytest.mark.parametrize("path", ["compare", "select"])
def test_a_global_option_after_the_sub_command_resolves_as_before_it(path: str, option: list[str],
                                                                     stop_when_resolved: None,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    name = "joint" if option == ["--joint"] else "rpm"
    after = CliRunner().invoke(app, [path, *ARGS[path], *option])
    assert after.exit_code == 0, after.output
    late = cli_settings.current()
    monkeypatch.setattr(cli_settings, "reconfigure", lambda *a: (_ for _ in ()).throw(typer.Exit(0)))
    before = cli_settings.configure(None, {name: True if name == "joint" else 600})
    assert (getattr(late, name), late.origin(name)) == (getattr(before, name), before.origin(name))
    assert late.origin(name) == option[0]


def test_a_flag_after_the_sub_command_beats_the_same_flag_before_it(stop_when_resolved: None) -> None:
    CliRunner().invoke(app, ["--rpm", "5", "--tpm", "9", "compare", *ARGS["compare"], "--rpm", "6"])
    resolved = cli_settings.current()
    assert (resolved.rpm, resolved.tpm) == (6, 9)


def test_settings_shows_the_store_path_it_opens_and_where_it_came_from(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from veriscale.engine.store import default_store_path

    config = tmp_path / "config.toml"
    config.write_text("")
    monkeypatch.setenv("VERISCALE_CONFIG", str(config))
    monkeypatch.delenv("VERISCALE_STORE", raising=False)

    def store_row(args: list[str]) -> dict[str, Any]:
        result = CliRunner().invoke(app, [*args, "--json"])
        assert result.exit_code == 0, result.output
        return next(r for r in json.loads(result.output)["settings"] if r["name"] == "store")

    row = store_row(["settings"])
    assert (row["value"], row["origin"]) == (str(default_store_path()), "default")
    monkeypatch.setenv("VERISCALE_STORE", str(tmp_path / "env.sqlite3"))
    row = store_row(["settings"])
    assert (row["value"], row["origin"]) == (str(tmp_path / "env.sqlite3"), "$VERISCALE_STORE")
    row = store_row(["settings", "--store", str(tmp_path / "flag.sqlite3")])
    assert (row["value"], row["origin"]) == (str(tmp_path / "flag.sqlite3"), "--store")
