"""``veriscale mcp``: veriscale's verdicts as MCP tools, on the official ``mcp`` SDK's low-level server,
over stdio or streamable HTTP::

    service = McpService(store, model, roots=(Path("/data/runs"),))
    anyio.run(serve_stdio, service)                         # what `veriscale mcp` runs
    anyio.run(serve_http, service, "127.0.0.1", 8766)       # `veriscale mcp --transport http`

Tools (:mod:`veriscale.integrations.mcp_tools`): ``score``, ``compare``, ``select``, ``track`` and
``runs``, each returning as structured content the fields its command's ``--json`` prints (with
``"schema": "veriscale.<kind>/1"``; the tool's output schema is that JSON schema). Arguments are
validated here, so a wrong one is an error result of one sentence, never a crashed server; so is a
path outside the ``--allow-dir`` folders. A long call reports ``notifications/progress`` per
finished model call (when the client sent a progress token), and a cancelled call
(``notifications/cancelled``) stops its model calls: those in flight are recorded ``cancelled``,
and so is its run.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from pydantic import ValidationError

from veriscale.engine.store import Store
from veriscale.errors import ModelCallError, UserError, one_line
from veriscale.integrations.mcp_tools import TOOLS, ToolContext, run_tool
from veriscale.redact import Redactor

SERVER_NAME = "veriscale"
HTTP_PATH = "/mcp"


@dataclass
class McpService:
    """What every tool call runs with: the store, the model, the folders it may read, and the redactor
    what the ``runs`` tool reads out of the store goes through (the config's ``[redact]`` patterns)."""

    store: Store
    model: Any
    roots: tuple[Path, ...] = ()
    concurrency: int = 4
    injection: Mapping[str, Any] = field(default_factory=dict)
    redactor: Redactor = field(default_factory=Redactor)


def output_schema(name: str) -> dict[str, Any]:
    """The tool's output schema: veriscale's JSON schema of its command's ``--json`` (``runs``: an
    object whose ``runs`` are ``runs list --json`` items)."""
    from veriscale import schemas

    kind = TOOLS[name].kind
    if kind is not None:
        return schemas.load(kind)
    item = {k: v for k, v in schemas.load("runs-list").items() if k not in ("$schema", "$id")}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "required": ["runs"],
            "properties": {"runs": {"type": "array", "items": item}}}


def tool_list() -> list[Any]:
    from mcp_types import Tool

    return [Tool(name=name, description=spec.description, input_schema=spec.params.model_json_schema(),
                 output_schema=output_schema(name)) for name, spec in TOOLS.items()]


def argument_error(name: str, exc: ValidationError) -> str:
    """A tool's invalid arguments in one sentence: the first problem, and how many more."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "arguments"
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    what = one_line(str(first["msg"])).rstrip(".")
    return f"the {name} tool's argument '{where}' is not valid: {what[:1].lower()}{what[1:]}{more}; " \
           "see the tool's input schema"


def _error(text: str) -> Any:
    from mcp_types import CallToolResult, TextContent

    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def _sentence(exc: BaseException) -> str:
    from veriscale.settings.words import cli_text

    if isinstance(exc, (UserError, ModelCallError)):
        return one_line(cli_text(exc.template))
    return one_line(f"{type(exc).__name__}: {exc}")


async def call_tool(service: McpService, name: str, arguments: Mapping[str, Any] | None,
                    report: Any = None) -> Any:
    """One ``tools/call``: its ``CallToolResult`` (an error result of one sentence for bad input);
    ``report(done, planned)``: an async progress reporter. A cancel of the awaiting task stops the work."""
    from mcp_types import CallToolResult, TextContent

    from veriscale.models.cancel import in_worker

    spec = TOOLS.get(name)
    if spec is None:
        return _error(f"there is no tool '{one_line(name)[:100]}': use one of {', '.join(TOOLS)}")
    if arguments is not None and not isinstance(arguments, Mapping):
        return _error(f"the {name} tool's arguments must be an object: see the tool's input schema")
    try:
        params = spec.params.model_validate(dict(arguments or {}))
    except ValidationError as exc:
        return _error(argument_error(name, exc))
    loop = asyncio.get_running_loop()
    latest = [0, 0]
    changed = asyncio.Event()

    def on_progress(done: int, planned: int) -> None:  # a worker thread's (the gateway loop's) callback
        latest[:] = [done, planned]
        loop.call_soon_threadsafe(changed.set)

    async def pump() -> None:
        sent = 0
        while True:
            await changed.wait()
            changed.clear()
            done, planned = latest
            if done != sent and report is not None:
                sent = done
                try:
                    await report(done, planned)
                except Exception:  # noqa: BLE001 - a client that stopped listening: the work goes on
                    pass

    def work(*, stop: Any) -> dict[str, Any]:
        ctx = ToolContext(store=service.store, model=service.model, roots=service.roots, stop=stop,
                          concurrency=service.concurrency,
                          injection=service.injection, on_progress=on_progress, redactor=service.redactor)
        return run_tool(name, params, ctx)

    pumping = asyncio.ensure_future(pump())
    try:
        payload = await in_worker(work)
    except (UserError, ModelCallError) as exc:
        return _error(_sentence(exc))
    except Exception as exc:  # noqa: BLE001 - a tool's crash is its result; the server goes on
        return _error(_sentence(exc))
    finally:
        pumping.cancel()
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(payload, ensure_ascii=False))],
                          structured_content=payload)


def build_server(service: McpService) -> Any:
    """The SDK's low-level ``Server`` with veriscale's tools."""
    from mcp.server.lowlevel.server import Server
    from mcp_types import ListToolsResult

    import veriscale

    async def list_tools(ctx: Any, params: Any) -> Any:
        return ListToolsResult(tools=tool_list())

    async def on_call(ctx: Any, params: Any) -> Any:
        async def report(done: int, planned: int) -> None:
            await ctx.session.report_progress(done, planned, f"{done} of {planned} model calls")

        return await call_tool(service, params.name, params.arguments, report)

    return Server(SERVER_NAME, version=veriscale.__version__,
                  instructions="Verify AI agent runs: score or compare responses, pick the best of N, track an "
                               "agent run's progress, list recent verdicts. Files are read only under the "
                               "folders the server was started with.",
                  on_list_tools=list_tools, on_call_tool=on_call)


async def serve_stdio(service: McpService) -> None:
    from mcp.server.stdio import stdio_server

    server = build_server(service)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def serve_http(service: McpService, host: str, port: int) -> None:
    """Streamable HTTP at ``http://HOST:PORT/mcp`` (on loopback the SDK's DNS-rebinding protection is on)."""
    import uvicorn

    app = build_server(service).streamable_http_app(streamable_http_path=HTTP_PATH, host=host)
    await uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).serve()
