"""The list of CLI modules; each has ``register(app)`` that adds its commands."""

from __future__ import annotations

import importlib
from typing import Callable

import typer

MODULES = [
    "veriscale.cli.verify",
    "veriscale.cli.models",
    "veriscale.cli.runs",
    "veriscale.cli.harness",
    "veriscale.cli.select",
    "veriscale.cli.select_many",
    "veriscale.cli.bench",
    "veriscale.cli.track",
    "veriscale.cli.serve_reward",
    "veriscale.cli.serve",
    "veriscale.cli.mcp",
    "veriscale.cli.race",
    "veriscale.cli.show_settings",
    "veriscale.cli.criteria",
]


def registrars() -> list[Callable[[typer.Typer], None]]:
    return [importlib.import_module(name).register for name in MODULES]
