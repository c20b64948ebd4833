"""Unified diffs (``.diff`` / ``.patch``): the patch is the candidate.

    detect(Path("fix.patch")) -> True
    load(Path("fix.patch")) -> [Candidate(id="fix", text="diff --git ...", artifacts={"patch": ...})]
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from veriscale.data.importers._files import DIFF_SUFFIXES, logical_suffix, read_text
from veriscale.data.model import Candidate, Trajectory
from veriscale.errors import UserError

NAME = "diff"
DESCRIPTION = "unified diff (.diff/.patch)"
CRITERIA = "swe"  # the criteria pack this format suggests (veriscale criteria show swe)

_DIFF_START = re.compile(r"^(diff --git |--- \S|Index: \S)", re.M)
_HUNK = re.compile(r"^@@ -\d+(,\d+)? \+\d+(,\d+)? @@", re.M)


def looks_like_diff(text: str) -> bool:
    """True when ``text`` has a file header and at least one hunk of a unified diff."""
    head = text[:20000]
    return bool(_DIFF_START.search(head) and _HUNK.search(head))


def detect(obj: Any) -> bool:
    """True for a ``.diff``/``.patch`` path, or another text file whose content is a diff."""
    if not isinstance(obj, Path) or not obj.is_file():
        return False
    if logical_suffix(obj) in DIFF_SUFFIXES:
        return True
    try:
        return looks_like_diff(read_text(obj))
    except UserError:
        return False


def load(obj: Path, source: str = "") -> list[Candidate]:
    """One candidate whose text (and final output) is the whole diff."""
    text = read_text(obj)
    if not looks_like_diff(text):
        raise UserError(f"'{obj}' has no unified-diff hunks (@@ ... @@): give a real patch")
    return [
        Candidate(
            id=_stem(obj),
            text=text,
            trajectory=Trajectory(steps=[], final_output=text),
            artifacts={"patch": str(obj)},
            source=source or str(obj),
        )
    ]


def _stem(path: Path) -> str:
    name = path.name
    return name[: -len(".gz")] if name.endswith(".gz") else name.rsplit(".", 1)[0] or name
