"""Small text helpers shared by the importers: exit codes, message content, task prompts.

    parse_exit_code('{"returncode": 2, "output": "..."}')   # -> 2
    parse_exit_code("<returncode>0</returncode><output>")   # -> 0
    content_text([{"type": "text", "text": "hi"}])          # -> "hi"
    content_images([{"type": "image", "image": "data:image/png;base64,..."}])  # -> [ImageRef(...)]
    task_from_prompt("Please solve this issue: Fix X\\n\\nYou can execute bash ...")  # -> "Fix X"
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

from veriscale.data.images import ImageRef
from veriscale.data.reader import try_json

# At most 10 digits: a longer number is no exit code (and past 4,300 digits int() refuses it).
_EXIT_CODE_PATTERNS = [
    re.compile(r"<returncode>\s*(-?\d{1,10})\s*</returncode>"),
    re.compile(r'"(?:returncode|exit_code|exitCode|exit_status)"\s*:\s*(-?\d{1,10})(?![\d.eE])'),
    re.compile(r"^\s*(?:exit code|exit status|return code|returncode)\s*[:=]?\s*(-?\d{1,10})\b", re.I | re.M),
    re.compile(r"\bProcess exited with (?:exit )?code (-?\d{1,10})\b", re.I),
]
EXIT_CODE_LIMIT = 2 ** 31  # exit codes are small; a larger number in a record is not one


def exit_code_value(value: Any) -> int | None:
    """``value`` as an exit code: an int (not a bool) of at most 32 bits, else None."""
    if isinstance(value, int) and not isinstance(value, bool) and -EXIT_CODE_LIMIT <= value < EXIT_CODE_LIMIT:
        return value
    return None


def parse_exit_code(text: str) -> int | None:
    """The exit code a tool output reports, or ``None`` when it reports none.

    Reads JSON ``returncode``/``exit_code`` fields, mini-swe-agent's ``<returncode>`` tag and
    plain ``exit code: N`` lines; only the first 2,000 characters are searched.
    """
    head = text[:2000]
    for pattern in _EXIT_CODE_PATTERNS:
        match = pattern.search(head)
        if match:
            return exit_code_value(int(match.group(1)))
    return None


def combine_exit_codes(codes: list[int | None]) -> int | None:
    """One exit code for a step with several tool results: the first non-zero, else 0, else None."""
    known = [c for c in codes if c is not None]
    if not known:
        return None
    return next((c for c in known if c != 0), 0)


def content_text(content: Any) -> str:
    """Text of a chat message ``content``: a string, or a list of parts (text, reasoning, ...)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                kind = part.get("type", "text")
                if isinstance(part.get("text"), str):
                    parts.append(part["text"])
                elif kind == "reasoning" and isinstance(part.get("reasoning"), str):
                    parts.append(f"(reasoning) {part['reasoning']}")
                elif kind in ("image", "image_url", "input_image"):
                    parts.append("[image]")
                elif isinstance(part.get("content"), (str, list)):
                    parts.append(content_text(part["content"]))
        return "\n".join(p for p in parts if p)
    if isinstance(content, dict):
        return content_text([content])
    return str(content)


def _image_location(part: dict[str, Any]) -> str:
    """Where an image part's image is: a path, a URL or a ``data:`` URL ('' when it names none).

    ATIF v1.6 ``{"type": "image", "source": {"media_type", "path"}}`` (or base64 ``"data"``, the
    Anthropic shape), Inspect's ``{"type": "image", "image": "<data URL or path>"}`` and OpenAI's
    ``{"type": "image_url", "image_url": {"url": ...}}`` (or ``input_image``)."""
    for key in ("image", "image_url", "url"):
        value = part.get(key)
        if isinstance(value, dict):
            value = value.get("url")
        if isinstance(value, str) and value.strip():
            return value.strip()
    source = part.get("source")
    if isinstance(source, dict):
        for key in ("path", "url"):
            if isinstance(source.get(key), str) and source[key].strip():
                return source[key].strip()
        if isinstance(source.get("data"), str) and source["data"].strip():
            data = source["data"].strip()
            if data.startswith("data:"):
                return data
            return f"data:{source.get('media_type') or 'image/png'};base64,{data}"
    if isinstance(source, str) and source.strip():
        return source.strip()
    return ""


def content_images(content: Any, base: Path | None = None,
                   resolve: Callable[[str], str] | None = None) -> list[ImageRef]:
    """The images in a message ``content`` (a list of parts, or one part), in order; a relative path
    is taken from ``base`` (the folder of the file that names it), a URL or ``data:`` URL as given.
    ``resolve`` first maps a location (an Inspect ``attachment://`` reference to its text)."""
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return []
    found: list[ImageRef] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type", "")
        if kind in ("image", "image_url", "input_image"):
            where = _image_location(part)
            if resolve is not None and where:
                where = resolve(where)
            if not where:
                continue
            if base is not None and "://" not in where and not where.startswith("data:") \
                    and not Path(where).is_absolute():
                where = str(base / where)
            found.append(ImageRef(source=where))
        elif isinstance(part.get("content"), list):
            found.extend(content_images(part["content"], base, resolve))
    return found


def arguments_dict(arguments: Any) -> dict[str, Any] | str:
    """Tool-call arguments as a dict when they are (or encode) a JSON object, else as text."""
    if isinstance(arguments, dict):
        return arguments
    if isinstance(arguments, str):
        decoded = try_json(arguments)
        return decoded if isinstance(decoded, dict) else arguments
    if arguments is None:
        return {}
    return str(arguments)


_PROMPT_PREFIXES = ("Please solve this issue:", "Please solve this task:")
_PROMPT_TAILS = (
    "\n\nYou can execute bash commands and edit files",
    "\n\n## Recommended Workflow",
    "\n\n<instructions>",
)


def task_from_prompt(prompt: str) -> str:
    """The task itself, without a known agent scaffold's prefix and trailing instructions.

    mini-swe-agent wraps the task as ``Please solve this issue: <task>`` followed by a long
    block of workflow rules; those rules say nothing about the task and are cut. A prompt in
    no known wrapper is returned unchanged (stripped).
    """
    text = prompt.strip()
    for prefix in _PROMPT_PREFIXES:
        if text.startswith(prefix):
            text = text[len(prefix):].lstrip()
            for tail in _PROMPT_TAILS:
                cut = text.find(tail)
                if cut > 0:
                    text = text[:cut]
            break
    for tag in ("pr_description", "task_description", "task"):
        match = re.search(rf"<{tag}>\s*(.*?)\s*</{tag}>", text, re.S)
        if match and len(match.group(1)) > 20:
            return match.group(1).strip()
    return text.strip()
