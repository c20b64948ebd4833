"""Bounded reads of hand-written files (criteria, skills) and the importers' size check, over the
one input reader (:mod:`veriscale.data.reader`): a FIFO would block, ``/dev/zero`` would never
end, and each refusal is one sentence naming the file.

    text = read_regular_text(Path("criteria.md"), "criteria file")   # UTF-8 text, or a UserError
    check_regular(Path("runs.jsonl"), "candidate file", 1 << 30)     # stat only
"""

from __future__ import annotations

from pathlib import Path

from veriscale.data import reader
from veriscale.errors import UserError

MAX_TEXT_BYTES = 64 << 20  # a hand-written file (criteria, a skill): far more than any real one


def check_regular(path: Path, what: str, max_bytes: int) -> None:
    """Refuse a missing path, a folder, a FIFO, socket or device, and a file over ``max_bytes``."""
    info = reader.check_regular(path, what, "give a file")
    if info.st_size > max_bytes:
        raise UserError(f"{what} '{path}' is {info.st_size} bytes, over the {max_bytes >> 20} MiB veriscale reads: "
                        "give a smaller file")


def read_regular_text(path: Path, what: str, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of ``path`` (the reader's checks, and at most ``max_bytes``)."""
    check_regular(path, what, max_bytes)
    return reader.read_text(path, what)
