"""The one filter for names a session wrote before they become host file names.

    name_problem("report\u202egnp.exe")   # 'a control or bidirectional-formatting character (U+202E) ...'
    shown_name("a\x1bb")                 # 'a\\x1bb': safe in a message or a tool reply

Control characters (C0 and C1), bidirectional overrides and isolates, line separators, and bytes
that are not UTF-8 (surrogate escapes) never become a host file name.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

#: C0/C1 controls, DEL, bidi marks/embeddings/overrides/isolates, line and paragraph separators.
NAME_HAZARDS = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_SURROGATES = re.compile("[\ud800-\udfff]")


def name_problem(name: str) -> str | None:
    """Why ``name`` (one path or a component) may not become a host file name, or None.

    >>> name_problem("report\u202egnp.exe")
    'a control or bidirectional-formatting character (U+202E) in the name'
    """
    hazard = NAME_HAZARDS.search(name)
    if hazard is not None:
        return f"a control or bidirectional-formatting character (U+{ord(hazard.group()):04X}) in the name"
    if _SURROGATES.search(name):
        return "the name is not UTF-8"
    return None


def member_problem(name: str, max_depth: int) -> str | None:
    """Why an archive member's ``name`` may not be unpacked under a folder (it leaves the folder, it
    is deeper than ``max_depth`` folders, or :func:`name_problem`), or None.

    >>> member_problem("../etc/passwd", 64)
    'leaves the folder'
    """
    parts = PurePosixPath(name).parts
    if not parts or name.startswith("/") or ".." in parts:
        return "leaves the folder"
    problem = name_problem(name)
    if problem is not None:
        return problem
    if len(parts) > max_depth:
        return f"deeper than {max_depth} folders"
    return None


def shown_name(name: str) -> str:
    """``name`` for a message or a tool reply: every hazard of :func:`name_problem` escaped."""
    escaped = NAME_HAZARDS.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                               else f"\\u{ord(m.group()):04x}", name)
    return _SURROGATES.sub(lambda m: f"\\x{ord(m.group()) - 0xdc00:02x}" if ord(m.group()) >= 0xdc80
                           else "\ufffd", escaped)
