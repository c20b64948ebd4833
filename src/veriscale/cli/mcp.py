"""``veriscale mcp``: veriscale's verdicts as MCP tools (score, compare, select, track, runs), for
Claude Code, Codex and any MCP client (docs/INTEGRATIONS.md)::

    veriscale mcp --allow-dir ~/agent-runs                          # stdio (a client starts it)
    veriscale mcp --transport http --port 8767 --allow-dir ~/agent-runs   # http://127.0.0.1:8767/mcp

Tools read texts given inline, and files only under the ``--allow-dir`` folders; every call runs
on ``--model`` and is recorded in ``--store`` like the command of the same name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List, Optional

import typer

from veriscale.cli import options as o
from veriscale.cli.common import info, user_errors
from veriscale.errors import UserError, setting

DEFAULT_PORT = 8767
TRANSPORTS = ("stdio", "http")


def register(app: typer.Typer) -> None:
    @app.command("mcp")
    def mcp(
        transport: Annotated[str, typer.Option("--transport", help="stdio (default: a client starts the server) or http (streamable HTTP at /mcp).")] = "stdio",
        host: Annotated[Optional[str], typer.Option("--host", help="Address to bind with --transport http: a loopback address (default 127.0.0.1).")] = None,
        port: Annotated[Optional[int], typer.Option("--port", help=f"Port with --transport http (default {DEFAULT_PORT}).")] = None,
        allow_dir: Annotated[Optional[List[Path]], typer.Option("--allow-dir", help="A folder the tools may read files from (repeatable); without one they take texts only.")] = None,
        model: o.ModelOpt = None, store: o.StoreOpt = None, concurrency: o.ConcurrencyOpt = None,
        redact: o.RedactOpt = None, no_redact: o.NoRedactOpt = False,
    ) -> None:
        """Serve score, compare, select, track and runs as MCP tools (stdio or streamable HTTP).

        Example: claude mcp add veriscale -- veriscale mcp --allow-dir ~/agent-runs
        """
        with user_errors():
            from veriscale.integrations import require_mcp

            require_mcp()
            if transport not in TRANSPORTS:
                raise UserError(f"{setting('transport', transport)} is unknown: use stdio or http")
            if transport == "stdio" and (host is not None or port is not None):
                raise UserError(f"{setting('host')} and {setting('port')} apply to {setting('transport', 'http')}: "
                                "drop them, or serve over HTTP")
            from veriscale.server.security import is_loopback

            bind = host or "127.0.0.1"
            if not is_loopback(bind):
                raise UserError(f"{setting('host', bind)} is not a loopback address: the MCP server has no token, "
                                "so it binds 127.0.0.1, ::1 or localhost only")
            listen = DEFAULT_PORT if port is None else port
            if not 0 < listen < 65536:
                raise UserError(f"{setting('port', listen)} is not a TCP port: give 1-65535")
            roots = []
            for folder in allow_dir or []:
                folder = folder.expanduser()
                if not folder.is_dir():
                    raise UserError(f"{setting('allow_dirs', str(folder))} is not a folder: give a folder that exists")
                roots.append(folder.resolve())
            from veriscale.integrations.mcp_server import McpService

            cs = o.command_settings(model, store, concurrency)
            service = McpService(o.open_store(cs), o.open_model(cs), roots=tuple(roots), concurrency=cs.concurrency,
                                 injection={**cs.injection(), "injection_policy": cs.injection_policy},
                                 redactor=o.output_redactor(redact, no_redact))
            shown = ", ".join(str(r) for r in roots) or "none (texts only)"
            where = "stdio" if transport == "stdio" else f"http://{bind}:{listen}/mcp"
            info(f"veriscale MCP server on {where} (store {service.store.path}); tools may read: {shown}",
                 highlight=False)
        import anyio

        from veriscale.integrations.mcp_server import serve_http, serve_stdio

        try:
            if transport == "stdio":
                anyio.run(serve_stdio, service)
            else:
                anyio.run(serve_http, service, bind, listen)
        except KeyboardInterrupt:
            pass
        finally:
            service.store.close()
