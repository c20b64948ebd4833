"""The grader contract and the grader command: how a delivery gets a score.

Grader contract (see docs/HARNESS.md): run on the host, never in the jail, as
``<command> --task TASK_DIR --deliverables DIR`` with ``VERISCALE_TASK_DIR``,
``VERISCALE_TASK_NAME`` and ``VERISCALE_DELIVERABLES`` also set; it prints exactly one
non-empty stdout line, a JSON object with ``"score"`` in [0, 1] (extra fields kept) and, optionally,
``"feedback"``: a string saying what failed, kept beside the score (``harness evolve`` learns from it),
and exits 0. Anything else is a grader failure. Deliverables are graded from a fresh copy with view
sidecars and symlinks left out, so a grader cannot change the originals and a delivery cannot
point the grader at files outside it: an office file in the copy that refers to another file (an
external workbook link, an external relationship other than a hyperlink, a formula into another
workbook) or holds a DTD is left out too, with a note, since a grader's library may open what it
names (:mod:`veriscale.harness.workspace.office_content`). The grader runs under its timeout and
a cap on its address space (``RLIMIT_AS``, :data:`DEFAULT_GRADER_MEMORY_MB`; thread pools of
numeric libraries kept to one thread unless the environment says otherwise): a grader over
either fails with one sentence that names the cap.

Usage::

    grader = GraderCommand.parse("python3 examples/grader/grade.py --references refs/")
    grade = grader.grade(Path("tasks/t1"), staged_deliverables)   # Grade(score=0.8, extra={...})
    parse_grader_output('{"score": 1}')                          # Grade(score=1.0, extra={})
    parse_grader_output('{"score": 0, "feedback": "rows_out wrong"}').feedback   # 'rows_out wrong'
"""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veriscale.errors import UserError, setting
from veriscale.harness.safe_fs import UnsafePath
from veriscale.harness.safe_write import copy_plain_tree
from veriscale.harness.workspace.office_content import refuse_office_files
from veriscale.harness.workspace.text_views import is_sidecar
from veriscale.harness.workspace.capped_child import ONE_THREAD

try:
    import resource
except ImportError:  # not POSIX
    resource = None  # type: ignore[assignment]

DEFAULT_GRADER_TIMEOUT_S = 600.0
#: MiB of address space one grader call may use (issue 30: one huge range took a grader to 3.4 GB)
DEFAULT_GRADER_MEMORY_MB = 4096.0
GRADER_ENV_TASK_DIR = "VERISCALE_TASK_DIR"
GRADER_ENV_TASK_NAME = "VERISCALE_TASK_NAME"
GRADER_ENV_DELIVERABLES = "VERISCALE_DELIVERABLES"


class GraderFailure(Exception):
    """The grader broke its contract for one input (the message says how)."""


@dataclass(frozen=True)
class Grade:
    """One grader answer: the score, its optional feedback and whatever else its JSON line held."""

    score: float
    extra: dict[str, Any] = field(default_factory=dict)
    feedback: str | None = None


def parse_grader_output(stdout: str) -> Grade:
    """Read the grader's stdout; ``GraderFailure`` unless it is one JSON line with a valid score."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if len(lines) != 1:
        raise GraderFailure(f"expected exactly one JSON line on stdout, got {len(lines)} lines (send logs to stderr)")
    try:
        data = json.loads(lines[0])
    except json.JSONDecodeError as exc:
        raise GraderFailure(f"stdout is not JSON ({exc.msg}): {lines[0][:120]!r}") from None
    if not isinstance(data, dict) or "score" not in data:
        raise GraderFailure(f"stdout JSON has no \"score\" field: {lines[0][:120]!r}")
    score = data.pop("score")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        raise GraderFailure(f"\"score\" must be a number, got {score!r}")
    if not 0.0 <= float(score) <= 1.0:
        raise GraderFailure(f"\"score\" must lie in [0, 1], got {score}")
    feedback = data.pop("feedback", None)
    if feedback is not None and not isinstance(feedback, str):
        raise GraderFailure(f"\"feedback\" must be a string (what failed, in words), got {type(feedback).__name__}")
    return Grade(score=float(score), extra=data, feedback=feedback or None)


@dataclass(frozen=True)
class GraderCommand:
    """A grader command line; ``grade`` appends ``--task`` and ``--deliverables`` and runs it."""

    argv: tuple[str, ...]
    timeout_s: float = DEFAULT_GRADER_TIMEOUT_S
    memory_mb: float = DEFAULT_GRADER_MEMORY_MB

    @classmethod
    def parse(cls, command: str, *, timeout_s: float = DEFAULT_GRADER_TIMEOUT_S,
              memory_mb: float = DEFAULT_GRADER_MEMORY_MB) -> "GraderCommand":
        """Split ``command`` like a shell; ``UserError`` when its program is missing or not executable."""
        try:
            argv = tuple(shlex.split(command))
        except ValueError as exc:
            raise UserError(f"grader command {command!r} cannot be split ({exc}): fix its quoting") from exc
        if not argv:
            raise UserError(f"grader command is empty: give {setting('grader')} a command such as 'python3 my_grader.py'")
        program = argv[0]
        if os.sep in program or (os.altsep and os.altsep in program):
            path = Path(program)
            if not path.is_file() or not os.access(path, os.X_OK):
                raise UserError(
                    f"grader program '{program}' is not an executable file: chmod +x it or run it through its "
                    f"interpreter ({setting('grader')} 'python3 {program} ...')"
                )
        elif shutil.which(program) is None:
            raise UserError(f"grader program '{program}' is not on PATH: give its full path or install it")
        if timeout_s <= 0:
            raise UserError(f"grader timeout must be positive, got {timeout_s}: set {setting('grader_timeout_s')} "
                            "to the seconds one grader call may take, e.g. 600")
        if not memory_mb > 0:
            raise UserError(f"grader memory cap must be positive, got {memory_mb}: "
                            "give the MiB one grader call may use")
        return cls(argv=argv, timeout_s=timeout_s, memory_mb=memory_mb)

    def grade(self, task_dir: Path, deliverables: Path) -> Grade:
        """Grade a staged deliverables folder; ``GraderFailure`` on any contract breach."""
        env = dict(os.environ)
        env[GRADER_ENV_TASK_DIR] = str(task_dir)
        env[GRADER_ENV_TASK_NAME] = task_dir.name
        env[GRADER_ENV_DELIVERABLES] = str(deliverables)
        for name in ONE_THREAD:
            env.setdefault(name, "1")  # a thread pool reserves address space per thread
        argv = [*self.argv, "--task", str(task_dir), "--deliverables", str(deliverables)]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=self.timeout_s,
                                  stdin=subprocess.DEVNULL, preexec_fn=self._cap_memory)
        except subprocess.TimeoutExpired:
            raise GraderFailure(f"timed out after {self.timeout_s:g}s (its time cap)") from None
        except OSError as exc:
            raise GraderFailure(f"could not start: {exc}") from None
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
            if "MemoryError" in (done.stderr or "")[-4096:] or "std::bad_alloc" in (done.stderr or "")[-4096:]:
                raise GraderFailure(f"ran out of its {self.memory_mb:g} MiB memory cap (exit status "
                                    f"{done.returncode}: {tail[0][:200]})")
            if done.returncode < 0:
                raise GraderFailure(f"was killed by signal {-done.returncode}, likely at its {self.memory_mb:g} MiB "
                                    f"memory cap: {tail[0][:200]}")
            raise GraderFailure(f"exited with status {done.returncode}: {tail[0][:200]}")
        return parse_grader_output(done.stdout)

    def _cap_memory(self) -> None:
        """In the grader's process, before it runs: cap its address space at ``memory_mb``."""
        if resource is None:  # not on this platform: the timeout still holds
            return
        limit = int(self.memory_mb * (1 << 20))
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard == resource.RLIM_INFINITY or limit < hard:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))

    def __str__(self) -> str:
        return shlex.join(self.argv)


def stage_deliverables(source: Path, dest: Path) -> list[str]:
    """Copy regular files of ``source`` into ``dest`` (no sidecars, no links, no office file that
    points outside itself); return what was left out (a path with its reason, or the refusal's sentence).

    The content check runs on the host's own copy, the very bytes the grader then reads.
    """
    try:
        skipped = copy_plain_tree(source, dest, skip=lambda rel: is_sidecar(Path(rel.name)))
        return skipped + [refusal.sentence for _rel, refusal in refuse_office_files(dest)]
    except UnsafePath as exc:
        raise UserError(f"deliverables folder '{source}' cannot be read safely ({exc}): rerun the delivery") from None
