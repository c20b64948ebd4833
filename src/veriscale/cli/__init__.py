"""The ``veriscale`` command: one sub-command per user job, each in its own module here."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="veriscale",
    help="Tell which run of your AI agent to trust.\n\nExample: veriscale compare task.md a.md b.md --json",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _register_all() -> None:
    from veriscale.cli import commands_registry

    for register in commands_registry.registrars():
        register(app)


_register_all()
