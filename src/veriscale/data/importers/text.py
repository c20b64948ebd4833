"""Plain text and Markdown answers (``.txt``, ``.md``, ...): the file's text is the candidate.

    detect(Path("answer_a.md")) -> True
    load(Path("answer_a.md")) -> [Candidate(id="answer_a", text="...")]

A file with no suffix counts as text when it is UTF-8 and not JSON.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from veriscale.data.importers._files import TEXT_SUFFIXES, logical_suffix, looks_like_json, read_text
from veriscale.data.model import Candidate
from veriscale.errors import UserError

NAME = "text"
DESCRIPTION = "plain text or Markdown (.txt/.md)"


def detect(obj: Any) -> bool:
    """True for a text/Markdown path, or a suffix-less UTF-8 file that is not JSON."""
    if not isinstance(obj, Path) or not obj.is_file():
        return False
    suffix = logical_suffix(obj)
    if suffix in TEXT_SUFFIXES:
        return True
    if suffix:
        return False
    try:
        return not looks_like_json(read_text(obj))
    except UserError:
        return False


def load(obj: Path, source: str = "") -> list[Candidate]:
    """One candidate whose text is the whole file."""
    text = read_text(obj)
    stem = obj.name[: -len(".gz")] if obj.name.endswith(".gz") else obj.name
    return [Candidate(id=stem.rsplit(".", 1)[0] or stem, text=text, source=source or str(obj))]
