"""``veriscale settings``: every setting this invocation resolved, and where each came from."""

from __future__ import annotations

import typer
from rich.table import Table

from veriscale.cli import options as o
from veriscale.cli.common import console, emit_json, user_errors
from veriscale.engine.store import default_store_path


def register(app: typer.Typer) -> None:
    @app.command("settings")
    def show(model: o.ModelOpt = None, store: o.StoreOpt = None, concurrency: o.ConcurrencyOpt = None,
             json_out: o.JsonOpt = False) -> None:
        """Print each setting's value and its origin (flag > environment > config file > default), the
        store as the path this invocation opens.

        Example: VERISCALE_RPM=600 veriscale --deadline 30 settings --json
        """
        with user_errors():
            resolved = o.command_settings(model, store, concurrency)
            rows = resolved.as_rows()
            for row in rows:  # the store this invocation opens, wherever it came from (None: the per-user data dir)
                if row["name"] == "store" and row["value"] is None:
                    row["value"] = str(default_store_path())
            if json_out:
                emit_json({"config_file": str(resolved.config.path) if resolved.config.path else None,
                           "settings": rows}, "settings")
                return
            table = Table(title=f"settings · config file: {resolved.config.path or 'none'}")
            for column in ("setting", "value", "from", "flag", "environment", "file key"):
                table.add_column(column, overflow="fold")
            for row in rows:
                value = row["value"]
                shown = ", ".join(value) if isinstance(value, list) else str(value)
                origin = "default (per-user data dir)" if row["name"] == "store" and row["origin"] == "default" \
                    else row["origin"]
                table.add_row(row["name"], shown, origin, row["flag"] or "", row["env"] or "", row["file"] or "")
            console.print(table)
