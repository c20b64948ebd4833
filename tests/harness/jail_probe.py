"""Shared pieces of the jail test suites: the hostile layout, probes run inside, small helpers.

``layout`` (a fixture in conftest.py) is a data root with an answer key, a task with its archive
beside it, and two session folders; ``probe`` runs Python attempts inside the jail and returns
what each one got (``"ok"``, ``["ok", value]`` or the errno name).
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from veriscale.harness.jail.sandbox import JailSpec, run_jailed

ANSWER = "ANSWER-KEY-7f3a"
ARCHIVED = "ARCHIVED-SCORE-91c2"
OTHER_NOTES = "OTHER-SESSION-NOTES-5d0e"
EVIDENCE = "rollout r01 says revenue grew 12%"
TASK_TEXT = "Compute the revenue growth."

# Prelude of every in-jail probe: run attempts, record "ok" or the errno name, print JSON.
PROBE_PRELUDE = textwrap.dedent(
    """
    import ctypes, errno, json, os, socket, sys
    results = {}
    def attempt(name, fn):
        try:
            value = fn()
            results[name] = "ok" if value is None else ["ok", value]
        except OSError as exc:
            results[name] = errno.errorcode.get(exc.errno, str(exc))
    def read(path):
        with open(path) as handle:
            return handle.read()
    libc = ctypes.CDLL(None, use_errno=True)
    def syscall_result(rc):
        if rc != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
    """
)


def session_spec(layout: dict[str, Path], **overrides: object) -> JailSpec:
    options: dict[str, object] = {
        "task_dir": layout["task"],
        "writable_dir": layout["out"],
        "hidden": [layout["task"] / "sessions"],
    }
    options.update(overrides)
    return JailSpec(**options)  # type: ignore[arg-type]


def probe(spec: JailSpec, body: str) -> dict[str, object]:
    """Run the attempts in ``body`` inside the jail; return what each one got."""
    code = PROBE_PRELUDE + textwrap.dedent(body) + "\nprint(json.dumps(results))\n"
    result = run_jailed(spec, [sys.executable, "-c", code], timeout_s=20)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def failed(outcome: object) -> bool:
    return isinstance(outcome, str) and outcome != "ok"
