"""TEST DOUBLES for ``harness run --executor ray``: scripted chat backends registered in each Ray worker
by :func:`register_in_worker` (the ``RayTasks`` setup), since a worker imports veriscale afresh.

- ``harness-scripted``: every task's sessions write valid records; the adjudication picks
  :data:`BASES` [task]. Routed by task (the run folder ``/<task>.runs/`` in the system prompt) and
  phase, so concurrent tasks and phases keep their own scripts.
- ``harness-killonce:FOLDER``: the same, but the first worker to reach an adjudication writes
  ``FOLDER/killed``, waits for ``FOLDER/go`` (the test writes it once the driver committed the task's
  first calls) and exits its process, as a worker killed mid-task would. Every phase a worker is asked
  for is appended to ``FOLDER/asked-<pid>.txt``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tests.support.scripted_chat import ScriptedChat, call, say

BASES = {"quarterly_report": "r02", "data_cleanup": "r01"}
GUARD_S = 300  # a hang guard only: the wait ends when the test writes its go file


def scripts(base: str) -> dict:
    return {
        "resolve": [call("write", path="ledger.json", content=json.dumps({"entries": []})), say("done")],
        "challenge": [call("write", path="ledger.json", content=json.dumps({"entries": []})), say("done")],
        "adjudicate": [call("write", path="finish.json", content=json.dumps(
            {"base": base, "revisions": [], "unresolved": []})), say("done")],
    }


class PerTaskChat(ScriptedChat):
    """TEST DOUBLE: one scripted chat per task (module docstring)."""

    uri = "harness-scripted"

    def __init__(self, bases: dict[str, str] | None = None) -> None:
        super().__init__({})
        self.per_task = {task: ScriptedChat(scripts(base)) for task, base in (bases or BASES).items()}

    def chat(self, messages, **kwargs):
        task = next(name for name in self.per_task if f"/{name}.runs/" in messages[0]["content"])
        return self.per_task[task].chat(messages, **kwargs)


class KillOnceChat(PerTaskChat):
    """TEST DOUBLE: the per-task chat whose first worker dies at its first adjudication call."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.folder = folder
        self.uri = f"harness-killonce:{folder}"

    def chat(self, messages, **kwargs):
        from tests.support.scripted_chat import phase_of

        phase = phase_of(messages)
        with (self.folder / f"asked-{os.getpid()}.txt").open("a") as log:
            log.write(phase + "\n")
        killed = self.folder / "killed"
        if phase == "adjudicate" and not killed.exists():
            killed.write_text(str(os.getpid()))
            deadline = time.monotonic() + GUARD_S
            while not (self.folder / "go").exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            os._exit(1)
        return super().chat(messages, **kwargs)


def register_in_worker() -> None:
    from veriscale.models.registry import register_backend

    register_backend(("harness-scripted",), lambda uri: PerTaskChat(), forms=("harness-scripted",))
    register_backend(("harness-killonce",), lambda uri: KillOnceChat(Path(uri.split(":", 1)[1])),
                     forms=("harness-killonce:DIR",))
