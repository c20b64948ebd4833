"""``veriscale settings``: every setting this invocation resolved, and where each came from."""

from __future__ import annotations

import typer
from rich.table import Table

from veriscale.cli import options as o
from veriscale.cli.common import console, emit_json, user_errors


def register(app: typer.Typer) -> None:
    @app.command("settings")
    def show(model: o.ModelOpt = None, store: o.StoreOpt = None, concurrency: o.ConcurrencyOpt = None,
             json_out: o.JsonOpt = False) -> None:
        """Print each setting's value and its origin (flag > environment > config file > default).

        Example: VERISCALE_RPM=600 veriscale --deadline 30 settings --json
        """
        with user_errors():
            resolved = o.command_settings(model, store, concurrency)
            rows = resolved.as_rows()
            if json_out:
                emit_json({"config_file": str(resolved.config.path) if resolved.config.path else None,
                           "settings": rows})
                return
            table = Table(title=f"settings · config file: {resolved.config.path or 'none'}")
            for column in ("setting", "value", "from", "flag", "environment", "file key"):
                table.add_column(column, overflow="fold")
            for row in rows:
                value = row["value"]
                shown = ", ".join(value) if isinstance(value, list) else "(per-user data dir)" if value is None else str(value)
                table.add_row(row["name"], shown, row["origin"], row["flag"], row["env"] or "", row["file"] or "")
            console.print(table)
