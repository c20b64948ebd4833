"""The evidence tools a verification session calls: read, ls, grep, find, run, write.

A :class:`ToolBox` is bound to one session. Reading tools see only the session's visible
folders (the task, its own output folder, read-only extras such as skills and the other
phases' ledgers); ``write`` only lands under the session's output folder; ``run`` executes a
shell command in the bubblewrap jail (``veriscale.harness.jail``) unless the jail is off::

    box = ToolBox(task_dir=Path("tasks/t1"), output_dir=Path("tasks/t1.runs/x/sessions/resolve"))
    box.schemas()                                  # OpenAI "tools" list for the chat request
    result = box.call("read", {"path": "spec/task.md", "start_line": 1, "end_line": 40})
    result.text, result.is_error

Relative paths of reading tools resolve against the task folder; relative paths of ``write``
resolve against the output folder. A bad call never raises: it returns a ``ToolResult`` with
``is_error`` set and a message the model can act on.
"""

from __future__ import annotations

import fnmatch
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veriscale.errors import UserError
from veriscale.harness.jail import JailSpec, run_jailed

DEFAULT_READ_CHARS = 20_000
DEFAULT_LIST_ENTRIES = 300
DEFAULT_MATCHES = 100
DEFAULT_OUTPUT_CHARS = 12_000
DEFAULT_RUN_TIMEOUT_S = 120.0
MAX_WRITE_CHARS = 2_000_000


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


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


@dataclass
class ToolBox:
    """The tools of one session, confined to its folders."""

    task_dir: Path
    output_dir: Path
    readonly_extra: Sequence[Path] = ()
    no_jail: bool = False
    run_timeout_s: float = DEFAULT_RUN_TIMEOUT_S
    read_chars: int = DEFAULT_READ_CHARS
    output_chars: int = DEFAULT_OUTPUT_CHARS
    deadline: float | None = None  # time.monotonic() value past which `run` gets no time
    enabled: Sequence[str] = TOOL_NAMES
    _handlers: dict[str, Callable[[dict[str, Any]], str]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.task_dir = Path(self.task_dir).resolve()
        self.output_dir = Path(self.output_dir).resolve()
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.readonly_extra = tuple(Path(p).resolve() for p in self.readonly_extra)
        unknown = [n for n in self.enabled if n not in TOOL_SCHEMAS]
        if unknown:
            raise UserError(f"unknown tool(s) {', '.join(unknown)}: pick from {', '.join(TOOL_NAMES)}")
        self._handlers = {
            "read": self._read, "ls": self._ls, "grep": self._grep,
            "find": self._find, "run": self._run, "write": self._write,
        }

    @property
    def visible_roots(self) -> tuple[Path, ...]:
        return (self.task_dir, self.output_dir, *self.readonly_extra)

    def schemas(self) -> list[dict[str, Any]]:
        """The OpenAI ``tools`` list for the enabled tools."""
        return [TOOL_SCHEMAS[name] for name in self.enabled]

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Run one tool; errors come back as a ``ToolResult`` with ``is_error`` set."""
        started = time.monotonic()
        if name not in self.enabled:
            return ToolResult(f"error: unknown tool '{name}'; available: {', '.join(self.enabled)}", True)
        if not isinstance(arguments, dict):
            return ToolResult(f"error: arguments of '{name}' must be a JSON object", True)
        try:
            text = self._handlers[name](arguments)
            is_error = False
        except ToolError as exc:
            text, is_error = f"error: {exc}", True
        except OSError as exc:
            text, is_error = f"error: {type(exc).__name__}: {exc.strerror or exc}", True
        return ToolResult(text, is_error, time.monotonic() - started)

    # -- path checks ---------------------------------------------------------------------------
    def _visible(self, raw: Any, *, default: Path | None = None) -> Path:
        if raw in (None, "") and default is not None:
            return default
        if not isinstance(raw, str):
            raise ToolError(f"path must be a string, got {raw!r}")
        path = Path(raw)
        resolved = (path if path.is_absolute() else self.task_dir / path).resolve()
        if not any(_within(resolved, root) for root in self.visible_roots):
            roots = ", ".join(str(r) for r in self.visible_roots)
            raise ToolError(f"'{raw}' is outside the folders this session may read ({roots})")
        if not resolved.exists():
            raise ToolError(f"'{raw}' does not exist")
        return resolved

    # -- tools ---------------------------------------------------------------------------------
    def _read(self, args: dict[str, Any]) -> str:
        path = self._visible(args.get("path"))
        if path.is_dir():
            raise ToolError(f"'{args.get('path')}' is a folder: use ls")
        start = _int_arg(args, "start_line", 1)
        end = _int_arg(args, "end_line", None)
        if start < 1 or (end is not None and end < start):
            raise ToolError("line range must satisfy 1 <= start_line <= end_line")
        with path.open("rb") as handle:
            head = handle.read(8192)
        if b"\x00" in head:
            view = path.with_name(path.name + ".view.txt")
            hint = f"; read its text view '{view.name}'" if view.exists() else "; inspect it with run (e.g. python3)"
            raise ToolError(f"'{args.get('path')}' is a binary file{hint}")
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        chosen = lines[start - 1: end]
        out, used = [], 0
        for number, line in enumerate(chosen, start=start):
            entry = f"{number}\t{line}"
            if used + len(entry) + 1 > self.read_chars:
                out.append(f"[cut at {self.read_chars} characters; read from line {number} on with start_line]")
                break
            out.append(entry)
            used += len(entry) + 1
        return "\n".join(out) if out else f"[no lines in range; the file has {len(lines)} lines]"

    def _ls(self, args: dict[str, Any]) -> str:
        path = self._visible(args.get("path"), default=self.task_dir)
        if path.is_file():
            return f"{path.name}\t{path.stat().st_size} bytes"
        entries = sorted(path.iterdir(), key=lambda p: (not p.is_dir(), p.name))
        lines = [f"{p.name}/" if p.is_dir() else f"{p.name}\t{p.stat().st_size} bytes" for p in entries[:DEFAULT_LIST_ENTRIES]]
        if len(entries) > DEFAULT_LIST_ENTRIES:
            lines.append(f"[{len(entries) - DEFAULT_LIST_ENTRIES} more entries not shown]")
        return "\n".join(lines) if lines else "[empty folder]"

    def _files_under(self, root: Path) -> list[Path]:
        if root.is_file():
            return [root]
        return sorted(p for p in root.rglob("*") if p.is_file())

    def _grep(self, args: dict[str, Any]) -> str:
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ToolError("grep needs a non-empty 'pattern'")
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ToolError(f"pattern {pattern!r} is not a valid regular expression ({exc})") from None
        root = self._visible(args.get("path"), default=self.task_dir)
        hits: list[str] = []
        for file in self._files_under(root):
            try:
                text = file.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            for number, line in enumerate(text.splitlines(), start=1):
                if regex.search(line):
                    hits.append(f"{file}:{number}:{line[:300]}")
                    if len(hits) >= DEFAULT_MATCHES:
                        return "\n".join(hits + [f"[stopped at {DEFAULT_MATCHES} matches]"])
        return "\n".join(hits) if hits else "[no matches]"

    def _find(self, args: dict[str, Any]) -> str:
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ToolError("find needs a non-empty glob 'pattern', e.g. '*.xlsx'")
        root = self._visible(args.get("path"), default=self.task_dir)
        found = [str(p) for p in self._files_under(root)
                 if fnmatch.fnmatch(p.name, pattern) or fnmatch.fnmatch(str(p.relative_to(root) if root.is_dir() else p.name), pattern)]
        shown = found[:DEFAULT_LIST_ENTRIES]
        if len(found) > len(shown):
            shown.append(f"[{len(found) - len(shown)} more not shown]")
        return "\n".join(shown) if shown else "[no files match]"

    def _run(self, args: dict[str, Any]) -> str:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolError("run needs a non-empty 'command' string")
        timeout = self.run_timeout_s
        if self.deadline is not None:
            timeout = min(timeout, self.deadline - time.monotonic())
            if timeout <= 1:
                raise ToolError("the session's time is up: no time left to run commands")
        spec = JailSpec(task_dir=self.task_dir, writable_dir=self.output_dir,
                        readonly_extra=self.readonly_extra, no_jail=self.no_jail)
        result = run_jailed(spec, ["/bin/sh", "-c", command], timeout_s=timeout)
        text = f"exit code: {result.returncode}" + (" (killed: time limit)" if result.timed_out else "")
        if result.stdout:
            text += "\nstdout:\n" + _cut(result.stdout, self.output_chars)
        if result.stderr:
            text += "\nstderr:\n" + _cut(result.stderr, self.output_chars // 2)
        return text

    def _write(self, args: dict[str, Any]) -> str:
        raw, content = args.get("path"), args.get("content")
        if not isinstance(raw, str) or not raw:
            raise ToolError("write needs a 'path' string")
        if not isinstance(content, str):
            raise ToolError("write needs a 'content' string (text only; build binary files with run)")
        if len(content) > MAX_WRITE_CHARS:
            raise ToolError(f"content is over {MAX_WRITE_CHARS} characters")
        path = Path(raw)
        target = (path if path.is_absolute() else self.output_dir / path)
        resolved = Path(os.path.normpath(target))
        if not _within(resolved, self.output_dir) or resolved == self.output_dir:
            raise ToolError(f"'{raw}' is outside your output folder {self.output_dir}: write only there")
        if resolved.parent.exists() and not _within(resolved.parent.resolve(), self.output_dir):
            raise ToolError(f"'{raw}' goes through a link out of your output folder: write only there")
        resolved.parent.mkdir(parents=True, exist_ok=True)
        if resolved.is_symlink():
            raise ToolError(f"'{raw}' is a link: write a regular file")
        resolved.write_text(content, encoding="utf-8")
        return f"wrote {len(content)} characters to {resolved}"


def _int_arg(args: dict[str, Any], name: str, default: int | None) -> int | None:
    value = args.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool):
        raise ToolError(f"'{name}' must be an integer")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ToolError(f"'{name}' must be an integer, got {value!r}") from None


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[cut: {len(text) - limit} more characters]"
