"""One ``grep`` tool call, run in a child process (``grep_worker``) that is killed at the deadline.

    from veriscale.harness.sessions.grep_run import compile_pattern, run_grep

    compile_pattern(pattern)                     # a ToolError in one sentence when RE2 cannot take it
    run = run_grep("needle", root, PurePosixPath("spec"), deadline=time.monotonic() + 60)
    run.hits, run.killed, run.returncode         # ["<root>/spec/a.md:3:needle ..."], False, 0

Patterns run on RE2 (PyPI ``google-re2``; no backtracking, so backreferences, lookaround, atomic
groups and possessive quantifiers are refused with a sentence saying so). RE2 is linear, but one
search over one long line can still run for a minute inside a single C call: only a process of its
own can be stopped there, so the walk and the matching run in the child and the hits already sent
are kept when it is killed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import re2

from veriscale.harness.safe_names import shown_name
from veriscale.harness.sessions.tool_interface import ToolError

DEFAULT_MATCHES = 100
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad pattern is the session's error, not a line on the host's stderr
_NOT_IN_RE2 = re.compile(r"\\[1-9]|\(\?<?[=!]|\(\?P=|\\g<|\(\?>|[*+?}][+]")


@dataclass
class GrepRun:
    """What one ``grep`` child did: the hits it sent, and whether the deadline killed it."""

    hits: list[str]
    killed: bool
    returncode: int | None


def run_grep(pattern: str, root: Path, rel: PurePosixPath, *, deadline: float,
             max_matches: int = DEFAULT_MATCHES) -> GrepRun:
    """Walk and match in a child process (``grep_worker``) that is killed when ``deadline`` passes.

    RE2 never backtracks, but one search over one long line can still run for a minute inside a
    single C call; only a process of its own can be stopped there. Hits already sent are kept.
    A child that fails (not killed) is a ``ToolError`` with the last line of its stderr.
    """
    env = dict(os.environ)
    package_parent = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen([sys.executable, "-m", "veriscale.harness.sessions.grep_worker"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    hits: list[str] = []
    errors = bytearray()

    def read_hits() -> None:
        for raw in proc.stdout:
            hits.append(json.loads(raw))

    def read_errors() -> None:
        for chunk in iter(lambda: proc.stderr.read(4096), b""):
            errors[:] = (errors + chunk)[-4096:]

    readers = [threading.Thread(target=read_hits, daemon=True), threading.Thread(target=read_errors, daemon=True)]
    for reader in readers:
        reader.start()
    killed = False
    try:
        try:
            proc.stdin.write(json.dumps({"pattern": pattern, "root": str(root), "rel": rel.as_posix(),
                                         "max_matches": max_matches}).encode() + b"\n")
            proc.stdin.close()
        except BrokenPipeError:
            pass
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        killed = True
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for reader in readers:
            reader.join()
    if proc.returncode != 0 and not killed:
        last = errors.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
        raise ToolError(f"grep failed: {last[0][:300]}")
    return GrepRun(hits, killed, proc.returncode)


def compile_pattern(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (linear time); a ``ToolError`` in one sentence when RE2 cannot take it.

    >>> compile_pattern(r"^(a+)+$").search("a" * 40 + "b") is None
    True
    """
    try:
        return re2.compile(pattern, options=_RE2_OPTIONS)
    except re2.error as exc:
        if _NOT_IN_RE2.search(pattern):
            raise ToolError(f"pattern {shown_name(pattern[:200])!r} uses a backreference, lookaround, atomic group or "
                            "possessive quantifier, which grep's linear-time engine (RE2) does not run: search "
                            "without it (e.g. grep a simpler pattern and read the hits)") from None
        detail = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ToolError(f"pattern {shown_name(pattern[:200])!r} is not a valid regular expression ({detail})") from None

