"""TEST DOUBLES for where a Ray cluster's calls go: two endpoints of one model, each logging the
task of every prompt it is asked, from whichever worker process asks.

- ``routelog:NAME:FOLDER``: the scripted scoring double as endpoint ``NAME`` (its ``limit_key``);
  each call appends ``NAME TASK`` to ``FOLDER/seen-<pid>.txt``, where TASK is the word after the
  ``Task`` marker in the prompt.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.support.scripted_model import ScriptedScoreModel

_TASK = re.compile(r"Task (\w+):")


class RouteLogModel(ScriptedScoreModel):
    """TEST DOUBLE: the scripted model as one named endpoint that logs which task's prompts reach it."""

    def __init__(self, uri: str) -> None:
        super().__init__()
        _, self.name, folder = uri.split(":", 2)
        self.uri, self.folder = uri, Path(folder)

    @property
    def limit_key(self) -> str:
        return f"routelog:{self.name}"

    def score(self, request):
        found = _TASK.search(request.messages[-1].content)
        with (self.folder / f"seen-{os.getpid()}.txt").open("a") as log:
            log.write(f"{self.name} {found.group(1) if found else '?'}\n")
        return super().score(request)


def seen(folder: Path) -> list[tuple[str, str]]:
    """(endpoint, task) of every call any process logged under ``folder``."""
    return [tuple(line.split(" ", 1)) for f in sorted(folder.glob("seen-*.txt"))  # type: ignore[misc]
            for line in f.read_text().splitlines()]


def register_route_in_worker() -> None:
    from tests.support.ray_doubles import register_in_worker
    from veriscale.models.registry import register_backend

    register_in_worker()
    register_backend(("routelog",), RouteLogModel, forms=("routelog:NAME:DIR",))
