"""Read a file the user named only when it is a regular file of bounded size: a FIFO would block,
``/dev/zero`` would never end, and each refusal is one sentence naming the file.

    text = read_regular_text(Path("criteria.md"), "criteria file")   # UTF-8 text, or a UserError
    check_regular(Path("runs.jsonl"), "candidate file", 1 << 30)     # stat only
"""

from __future__ import annotations

import stat
from pathlib import Path

from veriscale.errors import UserError

MAX_TEXT_BYTES = 64 << 20  # a hand-written file (criteria, a skill): far more than any real one


def check_regular(path: Path, what: str, max_bytes: int) -> None:
    """Refuse a missing path, a folder, a FIFO, socket or device, and a file over ``max_bytes``."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise UserError(f"{what} '{path}' does not exist: check the path") from None
    except OSError as exc:
        raise UserError(f"cannot read {what} '{path}' ({exc.strerror}): check the path and its permissions") from None
    if stat.S_ISDIR(info.st_mode):
        raise UserError(f"{what} '{path}' is a folder: give a file")
    if not stat.S_ISREG(info.st_mode):
        raise UserError(f"{what} '{path}' is not a regular file (a FIFO, socket or device): give a file")
    if info.st_size > max_bytes:
        raise UserError(f"{what} '{path}' is {info.st_size} bytes, over the {max_bytes >> 20} MiB veriscale reads: "
                        "give a smaller file")


def read_regular_text(path: Path, what: str, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of ``path`` after :func:`check_regular`; bad UTF-8 is a ``UserError`` too."""
    check_regular(path, what, max_bytes)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read {what} '{path}' ({exc.strerror}): check its permissions") from None
    try:
        return data[:max_bytes + 1].decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(f"{what} '{path}' is not UTF-8 text (byte {exc.start}): save it as UTF-8") from None
