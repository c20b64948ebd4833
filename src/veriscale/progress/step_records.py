"""The step object a running agent writes, one JSON object per line, for ``track --follow``.

    {"task": "Make the tests in tests/ pass"}                     # optional, first line only
    {"role": "agent", "text": "I will run the tests.", "tool_calls": [{"name": "bash", "arguments": {"command": "pytest"}}]}
    {"role": "tool", "observation": "2 failed, 10 passed", "exit_code": 1}
    {"role": "environment", "images": ["frames/0003.png", {"source": "data:image/png;base64,...", "label": "wrist cam"}]}
    {"done": true}                                                 # the run ended: stop following

``role`` is one of agent, tool, environment, user, system (default agent); every other field
is optional. ``images`` (what the agent saw at the step: paths, ``data:`` URLs, or
``{"source": ..., "label": ..., "at_s": ...}`` objects) are shown after the step; a step may be
images only. :func:`step_from_record` checks a parsed line and names what is wrong with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from veriscale.data.images import ImageRef
from veriscale.data.model import Step

ROLES = ("agent", "tool", "environment", "user", "system")


class RecordError(ValueError):
    """A line that is not a step object; the message names the problem."""


def step_from_record(record: Any, base: Path | None = None) -> Step:
    """The :class:`Step` a parsed JSON line describes (RecordError when it is not one); a relative image
    path is read from ``base`` (the steps file's folder) when given."""
    if not isinstance(record, dict):
        raise RecordError(f"a step must be a JSON object, not {type(record).__name__}")
    role = record.get("role", "agent")
    if role not in ROLES:
        raise RecordError(f"role {role!r} is not one of {', '.join(ROLES)}")
    text, observation = record.get("text", ""), record.get("observation", "")
    if not isinstance(text, str) or not isinstance(observation, str):
        raise RecordError("text and observation must be strings")
    calls = record.get("tool_calls", [])
    if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
        raise RecordError("tool_calls must be a list of objects")
    code = record.get("exit_code")
    if code is not None and (not isinstance(code, int) or isinstance(code, bool)):
        raise RecordError("exit_code must be a whole number or null")
    images = images_from_record(record.get("images", []), base)
    if not (text.strip() or observation.strip() or calls or images):
        raise RecordError("the step is empty: give text, tool_calls, an observation or images")
    return Step(role=role, text=text, tool_calls=calls, observation=observation, exit_code=code, images=images)


def _located(source: str, base: Path | None) -> str:
    """A relative image path under ``base``; a data URL, an absolute path or no base: as given."""
    if base is None or source.startswith("data:") or Path(source).is_absolute():
        return source
    return str(base / source)


def images_from_record(images: Any, base: Path | None = None) -> list[ImageRef]:
    """A step object's ``images``: each a path or data URL, or an object with ``source`` (and
    optionally ``label`` and ``at_s``); unlabelled ones are called "image N"; relative paths are read
    from ``base`` when given."""
    if images is None:
        return []
    if not isinstance(images, list):
        raise RecordError("images must be a list of paths, data URLs or {\"source\": ..., \"label\": ...} objects")
    refs = []
    for n, item in enumerate(images, 1):
        if isinstance(item, str) and item.strip():
            refs.append(ImageRef(source=_located(item.strip(), base), label=f"image {n}"))
            continue
        if not isinstance(item, dict) or not isinstance(item.get("source"), str) or not item["source"].strip():
            raise RecordError(f"image {n} must be a path, a data URL or an object with a \"source\" string")
        label, at_s = item.get("label", ""), item.get("at_s")
        if not isinstance(label, str):
            raise RecordError(f"the label of image {n} must be a string")
        if at_s is not None and (isinstance(at_s, bool) or not isinstance(at_s, (int, float))):
            raise RecordError(f"at_s of image {n} must be a number of seconds or null")
        refs.append(ImageRef(source=_located(item["source"].strip(), base), label=label or f"image {n}",
                             at_s=float(at_s) if at_s is not None else None))
    return refs


def is_done(record: Any) -> bool:
    return isinstance(record, dict) and record.get("done") is True


def task_of(record: Any) -> str | None:
    """The task text of a ``{"task": ...}`` line, else None."""
    if isinstance(record, dict) and set(record) == {"task"} and isinstance(record["task"], str):
        return record["task"]
    return None
