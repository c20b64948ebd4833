"""Every help text of every command keeps its ``[table]`` names: typer renders help as rich markup,
where an unescaped ``[proxy]`` is a style tag and vanishes ("unless  in the config file")."""

from __future__ import annotations

import re

import typer
from rich.errors import StyleSyntaxError
from rich.style import Style
from typer.testing import CliRunner

from veriscale.cli import app

#: an unescaped rich tag: "[name]" not preceded by a backslash (rich's own tag syntax)
TAG = re.compile(r"(?<!\\)\[([a-z#/@][^\[\]]*?)\]")


def _commands(command, path):
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():  # typer vendors click: duck-type the groups
        yield from _commands(sub, f"{path} {name}")


def _eaten(text: str) -> list[str]:
    """The tags of ``text`` that rich would drop: those that are not a style (bold, red, link=...)."""
    lost = []
    for match in TAG.finditer(text or ""):
        name = match.group(1)
        if name.startswith("/"):
            continue
        try:
            Style.parse(name)
        except StyleSyntaxError:
            lost.append(match.group(0))
    return lost


def test_the_scan_sees_an_unescaped_table_name() -> None:
    assert _eaten("unless [proxy] in the config file") == ["[proxy]"]
    assert _eaten(r"unless \[proxy] in the config file, [bold]bold[/bold]") == []


def test_no_help_text_of_any_command_loses_a_bracketed_name_to_rich_markup() -> None:
    root = typer.main.get_command(app)
    commands = list(_commands(root, "veriscale"))
    assert len(commands) > 20  # every sub-command and group was walked
    lost = []
    for path, command in commands:
        texts = [("help", command.help), ("epilog", command.epilog)]
        texts += [(p.opts[0] if getattr(p, "opts", None) else p.name, getattr(p, "help", None)) for p in command.params]
        lost += [f"{path} {where}: {tag}" for where, text in texts for tag in _eaten(text)]
    assert not lost, f"escape these as \\[name] in the help text: {lost}"


def test_serve_help_names_the_proxy_table() -> None:
    result = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "400", "TERMINAL_WIDTH": "400"})
    assert result.exit_code == 0, result.output
    assert "unless [proxy] in the config file" in result.output
