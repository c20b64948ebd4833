"""What an importer is: the typed contract every format module (built in or a plugin) meets.

A module satisfies it structurally, with four module-level names::

    NAME = "myformat"
    DESCRIPTION = "what it reads, for --help and error messages"
    def detect(obj) -> bool: ...                            # a parsed record, or a path (READS = "files")
    def load(obj, source: str = "") -> list[Candidate]: ...

    checked_importer(module, "myformat (pkg.mod)")   # the module, typed as an Importer, or one sentence
    reads_files(module)                               # True when detect/load take a path, not a record
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from veriscale.data.model import Candidate
from veriscale.errors import UserError

MEMBERS = ("NAME", "DESCRIPTION", "detect", "load")


@runtime_checkable
class Importer(Protocol):
    """One input format: its name and description, a detector and a loader."""

    NAME: str
    DESCRIPTION: str

    def detect(self, obj: Any) -> bool: ...

    def load(self, obj: Any, source: str = "") -> list[Candidate]: ...


def checked_importer(module: object, where: str) -> Importer:
    """``module`` as an :class:`Importer`, or a UserError naming what it lacks."""
    if not isinstance(module, Importer):
        missing = [n for n in MEMBERS if not hasattr(module, n)]
        raise UserError(f"the importer plugin {where} lacks {', '.join(missing)}: an importer "
                        "defines NAME, DESCRIPTION, detect and load")
    return module


def reads_files(module: object) -> bool:
    """Whether the importer detects and loads whole files by path (``READS = "files"``), not parsed records."""
    return getattr(module, "READS", "records") == "files"
