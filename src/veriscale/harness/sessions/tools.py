"""The evidence tools a verification session calls: read, ls, grep, find, run, write.

A :class:`ToolBox` is bound to one session. Reading tools see only the session's visible
folders (the task, its own output folder, read-only extras such as skills and the other
phases' ledgers); ``write`` only lands under the session's output folder; ``run`` executes a
shell command in the bubblewrap jail (``veriscale.harness.jail.sandbox``) unless the jail is off::

    box = ToolBox(task_dir=Path("tasks/t1"), output_dir=Path("tasks/t1.runs/x/sessions/resolve"))
    box.schemas()                                  # OpenAI "tools" list for the chat request
    result = box.call("read", {"path": "spec/task.md", "start_line": 1, "end_line": 40})
    result.text, result.is_error

Relative paths of reading tools resolve against the task folder; relative paths of ``write``
resolve against the output folder. A bad call never raises: it returns a ``ToolResult`` with
``is_error`` set and a message the model can act on.

Every tool runs in time linear in what it reads: ``grep`` patterns run on RE2 (PyPI
``google-re2``; no backtracking), and with ``deadline`` set no call outlives it: walks stop at the
deadline with what they found, ``run`` gets only the time left (its hand-back included), and
``grep`` walks and matches in a child process (``grep_run.py``, ``grep_worker``) killed at the
deadline (or after ``GREP_TIMEOUT_S`` without one), since one RE2 search over one long line can run
for a minute inside a single C call. The tools' schemas, results and errors: ``tool_interface.py``.
"""

from __future__ import annotations

import fnmatch
import os
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from veriscale.errors import UserError
from veriscale.harness.jail.sandbox import (
    HARVEST_GRACE_S,
    JailLimits,
    JailSpec,
    run_jailed,
)
from veriscale.harness.safe_fs import (
    UnsafePath,
    describe,
    is_within,
    lstat_beneath,
    open_dir_beneath,
    read_bytes_beneath,
    resolved,
    split_under,
    walk_regular_files,
)
from veriscale.harness.safe_names import shown_name
from veriscale.harness.safe_write import write_beneath
from veriscale.harness.sessions.grep_run import GrepRun, compile_pattern, run_grep
from veriscale.harness.sessions.tool_interface import (
    TOOL_NAMES,
    TOOL_SCHEMAS,
    ToolError,
    ToolResult,
)

DEFAULT_READ_CHARS = 20_000
DEFAULT_LIST_ENTRIES = 300
DEFAULT_OUTPUT_CHARS = 12_000
DEFAULT_RUN_TIMEOUT_S = 120.0
MAX_WRITE_CHARS = 2_000_000
MAX_READ_BYTES = 64 << 20
MAX_PATTERN_CHARS = 4_000
GREP_TIMEOUT_S = 60.0  # a grep without a session deadline is killed after this long


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
    limits: JailLimits = field(default_factory=JailLimits)
    enabled: Sequence[str] = TOOL_NAMES
    _handlers: dict[str, Callable[[dict[str, Any]], str]] = field(init=False, repr=False)
    last_grep: GrepRun | None = field(default=None, init=False, repr=False)  # the last grep's child, for checks

    def __post_init__(self) -> None:
        self.task_dir = resolved(self.task_dir, "task folder")
        self.output_dir = resolved(self.output_dir, "output folder")
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.readonly_extra = tuple(resolved(p, "read-only folder") for p in self.readonly_extra)
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
        if self._time_up():
            return ToolResult("error: the session's time is up: no further tool calls", True)
        if name not in self.enabled:
            return ToolResult(f"error: unknown tool '{name}'; available: {', '.join(self.enabled)}", True)
        if not isinstance(arguments, dict):
            return ToolResult(f"error: arguments of '{name}' must be a JSON object", True)
        try:
            text = self._handlers[name](arguments)
            is_error = False
        except (ToolError, UnsafePath) as exc:  # UnsafePath: e.g. a folder moved while it was walked
            text, is_error = f"error: {exc}", True
        except OSError as exc:
            text, is_error = f"error: {type(exc).__name__}: {exc.strerror or exc}", True
        return ToolResult(text, is_error, time.monotonic() - started)

    def _time_up(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    # -- path checks ---------------------------------------------------------------------------
    def _visible(self, raw: Any, *, default: Path | None = None) -> tuple[Path, PurePosixPath]:
        """``(root, path below it)`` for a visible path; links are never followed on the way."""
        if raw in (None, "") and default is not None:
            raw = str(default)
        if not isinstance(raw, str):
            raise ToolError(f"path must be a string, got {raw!r}")
        path = Path(raw)
        found = split_under(path if path.is_absolute() else self.task_dir / path, self.visible_roots)
        if found is None:
            roots = ", ".join(str(r) for r in self.visible_roots)
            raise ToolError(f"'{raw}' is outside the folders this session may read ({roots})")
        root, rel = found
        try:
            info = lstat_beneath(root, rel)
        except UnsafePath:
            raise ToolError(f"'{raw}' does not exist (links are not followed)") from None
        if stat.S_ISLNK(info.st_mode):
            raise ToolError(f"'{raw}' is a link: links are not followed; read the file itself")
        return root, rel

    # -- tools ---------------------------------------------------------------------------------
    def _read(self, args: dict[str, Any]) -> str:
        root, rel = self._visible(args.get("path"))
        info = lstat_beneath(root, rel)
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"'{args.get('path')}' is a folder: use ls")
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(f"'{args.get('path')}' is {describe(info.st_mode)}, not a file to read")
        start = _int_arg(args, "start_line", 1)
        end = _int_arg(args, "end_line", None)
        if start < 1 or (end is not None and end < start):
            raise ToolError("line range must satisfy 1 <= start_line <= end_line")
        try:
            data = read_bytes_beneath(root, rel, max_bytes=MAX_READ_BYTES)
        except UnsafePath as exc:
            raise ToolError(str(exc)) from None
        if b"\x00" in data[:8192]:
            view = root.joinpath(*rel.parts).with_name(rel.name + ".view.txt")
            hint = f"; read its text view '{view.name}'" if view.is_file() and not view.is_symlink() else "; inspect it with run (e.g. python3)"
            raise ToolError(f"'{args.get('path')}' is a binary file{hint}")
        lines = data.decode("utf-8", errors="replace").splitlines()
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
        root, rel = self._visible(args.get("path"), default=self.task_dir)
        info = lstat_beneath(root, rel)
        if not stat.S_ISDIR(info.st_mode):
            return f"{_shown(rel.name)}\t{_size_text(info)}"
        entries = []
        fd = open_dir_beneath(root, rel)
        stopped = False
        try:
            for name in os.listdir(fd):
                if len(entries) % 256 == 0 and self._time_up():
                    stopped = True
                    break
                entries.append((name, os.stat(name, dir_fd=fd, follow_symlinks=False)))
        finally:
            os.close(fd)
        entries.sort(key=lambda e: (not stat.S_ISDIR(e[1].st_mode), e[0]))
        lines = [f"{_shown(name)}/" if stat.S_ISDIR(st.st_mode) else f"{_shown(name)}\t{_size_text(st)}"
                 for name, st in entries[:DEFAULT_LIST_ENTRIES]]
        if len(entries) > DEFAULT_LIST_ENTRIES:
            lines.append(f"[{len(entries) - DEFAULT_LIST_ENTRIES} more entries not shown]")
        if stopped:
            lines.append(_STOPPED)
        return "\n".join(lines) if lines else "[empty folder]"

    def _files_under(self, root: Path, rel: PurePosixPath) -> Iterator[tuple[Path, PurePosixPath]]:
        """Regular files at or below ``root/rel`` as ``(root, relative path)``; links are skipped."""
        mode = lstat_beneath(root, rel).st_mode
        if stat.S_ISREG(mode):
            yield root, rel
        elif stat.S_ISDIR(mode):
            for path, _ in walk_regular_files(root, rel):
                yield root, path

    def _grep(self, args: dict[str, Any]) -> str:
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ToolError("grep needs a non-empty 'pattern'")
        if len(pattern) > MAX_PATTERN_CHARS:
            raise ToolError(f"pattern is {len(pattern)} characters long, over {MAX_PATTERN_CHARS}: search for a shorter one")
        compile_pattern(pattern)  # a bad pattern is one sentence, before any child starts
        root, rel = self._visible(args.get("path"), default=self.task_dir)
        cap = time.monotonic() + GREP_TIMEOUT_S
        run = run_grep(pattern, root, rel, deadline=cap if self.deadline is None else min(cap, self.deadline))
        self.last_grep = run
        hits = list(run.hits)
        if run.killed:
            hits.append(_STOPPED if self._time_up() else
                        f"[stopped: grep ran past its {GREP_TIMEOUT_S:.0f} s; search a narrower path or a simpler pattern]")
        return "\n".join(hits) if hits else "[no matches]"

    def _find(self, args: dict[str, Any]) -> str:
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ToolError("find needs a non-empty glob 'pattern', e.g. '*.xlsx'")
        if len(pattern) > MAX_PATTERN_CHARS:
            raise ToolError(f"pattern is {len(pattern)} characters long, over {MAX_PATTERN_CHARS}: give a shorter glob")
        root, rel = self._visible(args.get("path"), default=self.task_dir)
        found, stopped = [], False
        for number, (base, file) in enumerate(self._files_under(root, rel)):
            if number % 256 == 0 and self._time_up():
                stopped = True
                break
            below = file.relative_to(rel).as_posix() if file != rel else file.name
            if fnmatch.fnmatch(file.name, pattern) or fnmatch.fnmatch(below, pattern):
                found.append(_shown(str(base.joinpath(*file.parts))))
        shown = found[:DEFAULT_LIST_ENTRIES]
        if len(found) > len(shown):
            shown.append(f"[{len(found) - len(shown)} more not shown]")
        if stopped:
            shown.append(_STOPPED)
        return "\n".join(shown) if shown else "[no files match]"

    def _run(self, args: dict[str, Any]) -> str:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolError("run needs a non-empty 'command' string")
        timeout = self.run_timeout_s
        if self.deadline is not None:  # the jail's hand-back grace is spent inside the session's time
            timeout = min(timeout, self.deadline - time.monotonic() - HARVEST_GRACE_S)
            if timeout <= 1:
                raise ToolError("the session's time is up: no time left to run commands")
        spec = JailSpec(task_dir=self.task_dir, writable_dir=self.output_dir,
                        readonly_extra=self.readonly_extra, no_jail=self.no_jail, limits=self.limits)
        result = run_jailed(spec, ["/bin/sh", "-c", command], timeout_s=timeout)
        text = f"exit code: {result.returncode}" + (" (killed: time limit)" if result.timed_out else "")
        if result.limit == "memory":
            text += f" (killed: memory limit of {self.limits.memory_bytes >> 20} MiB)"
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
        if not is_within(resolved, self.output_dir) or resolved == self.output_dir:
            raise ToolError(f"'{raw}' is outside your output folder {self.output_dir}: write only there")
        rel = PurePosixPath(resolved.relative_to(self.output_dir).as_posix())
        try:
            try:
                if stat.S_ISDIR(lstat_beneath(self.output_dir, rel).st_mode):
                    raise ToolError(f"'{raw}' is a folder: write to a file path")
            except UnsafePath:
                pass  # not there yet (or a link on the way: write_beneath says which)
            write_beneath(self.output_dir, rel, content.encode("utf-8"))  # no link on the way, none written through
        except UnsafePath as exc:
            raise ToolError(f"'{raw}' goes through a link or a file: write only to plain folders ({exc})") from None
        return f"wrote {len(content)} characters to {resolved}"


_STOPPED = "[stopped: the session's time is up]"


def _shown(name: str) -> str:
    """A file name as printed to the model: control and bidi characters escaped, never passed through."""
    return shown_name(name)


def _size_text(info: os.stat_result) -> str:
    if stat.S_ISREG(info.st_mode):
        return f"{info.st_size} bytes"
    return f"({describe(info.st_mode)})"


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
