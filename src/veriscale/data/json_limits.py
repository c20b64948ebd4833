"""JSON as veriscale reads untrusted input (candidate files, request bodies): within a depth cap,
no number past Python's digit limit, no lone surrogate (which could never be stored or printed).

    parse('{"a": 1}', "'runs.json'")        # -> {"a": 1}; a UserError naming 'runs.json' otherwise
    try_parse('{"returncode": 0}')          # -> {...}, or None for anything that is not plain JSON
    shown("a\\nb")                           # -> 'a\\\\nb': untrusted text for a one-line message
"""

from __future__ import annotations

import json
import re
from typing import Any

from veriscale.errors import UserError

MAX_DEPTH = 100  # nesting levels of one record; real trajectories use about ten
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


class JsonLimit(ValueError):
    """Valid JSON that veriscale refuses; the message is the phrase for a sentence."""


def _limit_problem(value: Any, text: str) -> str | None:
    surrogates = bool(_SURROGATE_ESCAPE.search(text))
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > MAX_DEPTH:
                return f"nests deeper than {MAX_DEPTH} levels"
            children = list(item.values()) + list(item) if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
        elif surrogates and isinstance(item, str) and _SURROGATE.search(item):
            return "holds a lone surrogate escape such as \\ud800, which is not text"
    return None


def decode(text: str) -> Any:
    """``json.loads`` within the caps: ``JSONDecodeError`` for bad JSON, ``JsonLimit`` for the caps."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise JsonLimit(f"nests deeper than {MAX_DEPTH} levels") from None
    except ValueError:  # "Exceeds the limit (4300 digits) for integer string conversion"
        raise JsonLimit("holds a number of more than 4,300 digits") from None
    problem = _limit_problem(value, text)
    if problem is not None:
        raise JsonLimit(problem)
    return value


def parse(text: str, where: str) -> Any:
    """``text`` as JSON, or a ``UserError`` whose sentence names ``where`` (e.g. "'a.json' line 3")."""
    try:
        return decode(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): "
                        "fix it or give its real format") from None
    except JsonLimit as exc:
        raise UserError(f"{where} {exc}: fix the export or drop that value") from None


def try_parse(text: str) -> Any | None:
    """``text`` as JSON when it is JSON within the caps, else None (for text that may hold JSON)."""
    try:
        return decode(text)
    except ValueError:  # JSONDecodeError and JsonLimit
        return None


def shown(text: Any, limit: int = 60) -> str:
    """Untrusted text for a one-line message: control and surrogate characters escaped, cut at ``limit``."""
    text = str(text)
    cut = text[:limit]
    escaped = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in cut)
    return escaped + ("…" if len(text) > limit else "")
