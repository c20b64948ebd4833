"""Start and stop a host-side worker child (the text views, claim extraction): ``python -c`` importing
only the worker's module, the ``veriscale`` package registered by path so its ``__init__`` (the
scoring stack, about a second) does not load, numeric libraries held to one thread, its own
session so a kill reaches all of it::

    child = start_child("veriscale.harness.workspace.view_worker", ready=lambda c: read(c) == READY,
                        what="the text-view process")
    stop_child(child)          # stdin closed, 5 s to end, then killed; its stdout closed
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import veriscale
from veriscale.errors import UserError

READY = b"ready"
#: what a worker writes first, once its readers are imported; the caller's deadlines start then
STARTUP_SECONDS = 120
ONE_THREAD = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")  # no pools to swell the address space


def _boot(module: str) -> str:
    return ("import sys, types; package = types.ModuleType('veriscale'); package.__path__ = [sys.argv[1]]; "
            f"sys.modules['veriscale'] = package; from {module} import serve; serve()")


def start_child(module: str, *, ready: Callable[[subprocess.Popen[bytes]], bool], what: str) -> subprocess.Popen[bytes]:
    """``module``'s ``serve()`` in a child; ``ready(child)`` reads its first line. A child that does not
    say ready is killed and the failure is one sentence naming ``what`` and how to see why."""
    package_dir = str(Path(veriscale.__file__).resolve().parent)
    env = {**os.environ, **{name: "1" for name in ONE_THREAD}}
    child = subprocess.Popen(
        [sys.executable, "-c", _boot(module), package_dir], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, bufsize=0, start_new_session=True, env=env,
    )
    if not ready(child):
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
        raise UserError(f"{what} ({sys.executable}) did not start: run "
                        f"'{sys.executable} -c \"import {module}\"' to see why")
    return child


def stop_child(child: subprocess.Popen[bytes] | None) -> None:
    """Stop ``child`` (killed if it is still busy after its stdin closed and 5 s passed)."""
    if child is None:
        return
    if child.stdin is not None:
        try:
            child.stdin.close()
        except OSError:
            pass
    try:
        child.wait(timeout=5)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
    if child.stdout is not None:
        child.stdout.close()
