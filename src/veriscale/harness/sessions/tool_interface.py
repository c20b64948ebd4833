"""What the model sees of a session's tools: their schemas, what a call gives back, and its errors.

    from veriscale.harness.sessions.tool_interface import TOOL_NAMES, TOOL_SCHEMAS, ToolError, ToolResult

    request_tools = [TOOL_SCHEMAS[name] for name in ("read", "ls")]   # OpenAI "tools" entries
    TOOL_NAMES                                   # ('read', 'ls', 'grep', 'find', 'run', 'write')
    ToolResult("error: 'x' does not exist", is_error=True)
    raise ToolError("grep needs a non-empty 'pattern'")   # a call the model must correct

The tools themselves are :class:`veriscale.harness.sessions.tools.ToolBox`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ToolResult:
    """What one tool call gave back to the model."""

    text: str
    is_error: bool = False
    duration_s: float = 0.0


class ToolError(Exception):
    """A tool call the model must correct (bad path, outside its folders, bad arguments)."""


def _schema(name: str, description: str, properties: dict[str, Any], required: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": list(required)},
        },
    }


_STR = {"type": "string"}
_INT = {"type": "integer"}

TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "read": _schema(
        "read", "Read a text file (relative paths start at the task folder). Optional 1-based line range.",
        {"path": _STR, "start_line": _INT, "end_line": _INT}, ["path"]),
    "ls": _schema("ls", "List a folder (relative paths start at the task folder).", {"path": _STR}, []),
    "grep": _schema(
        "grep", "Search files under a folder for a regular expression; prints path:line:text.",
        {"pattern": _STR, "path": _STR}, ["pattern"]),
    "find": _schema(
        "find", "Find files whose path matches a glob such as '*.csv' under a folder.",
        {"pattern": _STR, "path": _STR}, ["pattern"]),
    "run": _schema(
        "run", "Run a shell command (e.g. python3 -c ...) in the sandbox; the working folder is your output folder.",
        {"command": _STR}, ["command"]),
    "write": _schema(
        "write", "Write a text file under your output folder (relative paths start there).",
        {"path": _STR, "content": _STR}, ["path", "content"]),
}
TOOL_NAMES = tuple(TOOL_SCHEMAS)
