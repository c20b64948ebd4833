"""Did the user put the task first? A note when another argument reads like the task.

``score TASK CANDIDATE`` and ``compare TASK A B`` take the task first. ``compare a.md task.md b.md``
would judge ``a.md`` as the task with no word; this says so, from the names and texts alone::

    misplaced_task({"a.md": "def f(): ...", "task.md": "Write f."}, first="a.md")
    # 'task.md'  (its name says task, the first's does not)
"""

from __future__ import annotations

import re
from pathlib import PurePath

_TASK_NAME = re.compile(r"(?:^|[^a-z])(?:task|prompt|question|instruction|instructions|issue)(?:[^a-z]|$)")


def _task_named(path: str) -> bool:
    return bool(_TASK_NAME.search(PurePath(path).stem.lower()))


def misplaced_task(texts: dict[str, str], first: str) -> str | None:
    """The argument that reads like the task rather than ``first`` (None when ``first`` reads like it,
    or nothing else does): its file name says task and the first's does not, or it is the shortest text
    and a candidate quotes it whole."""
    if first == "-" or _task_named(first):
        return None
    others = [p for p in texts if p != first and p != "-"]
    named = [p for p in others if _task_named(p)]
    if len(named) == 1:
        return named[0]
    shortest = min(others, key=lambda p: len(texts[p].strip()), default=None)
    if shortest is not None and len(texts[shortest].strip()) < len(texts[first].strip()):
        quoted = texts[shortest].strip()
        if len(quoted) >= 20 and any(quoted in texts[p] for p in texts if p != shortest):
            return shortest
    return None


def task_order_note(texts: dict[str, str], first: str, command: str) -> str | None:
    """The note to print when :func:`misplaced_task` finds one (``command``: ``compare`` or ``score``)."""
    other = misplaced_task(texts, first)
    if other is None:
        return None
    rest = " ".join(p for p in texts if p != other)
    return (f"'{first}' was taken as the task (the task comes first), but '{other}' reads like the task: "
            f"if it is, put it first: veriscale {command} {other} {rest}")
