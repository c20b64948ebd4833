"""Run ``veriscale`` in a subprocess under a hang guard, and check a refusal is one sentence.

    proc = run_cli("score", "task.md", "-", stdin=b"answer")
    one_sentence(proc, "candidate", "FIFO")     # exit 2, no traceback, one "error:" naming these
"""

from __future__ import annotations

import os
import subprocess
import sys

HANG_GUARD_S = 120  # each command in these tests answers in seconds; a hang is what this catches


def run_cli(*args: str, stdin: bytes | None = None, env: dict[str, str] | None = None,
            timeout: float = HANG_GUARD_S, cwd: str | os.PathLike[str] | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "veriscale", *args], capture_output=True, input=stdin,
                          timeout=timeout, env={**os.environ, **(env or {})}, cwd=cwd,
                          stdin=None if stdin is not None else subprocess.DEVNULL)
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode("utf-8", "replace"),
                                       proc.stderr.decode("utf-8", "replace"))


def one_sentence(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """The error sentence (exit 2, no traceback); each of ``needles`` must be in it."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    err = " ".join(proc.stderr.split())
    assert err.count("error:") == 1, err
    err = err[err.index("error:"):]  # after any note (the embedded model names itself first)
    for needle in needles:
        assert needle in err, err
    return err
