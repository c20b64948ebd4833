"""Read a task or candidate given on the command line: a file (text, Markdown, JSON) or ``-``.

    read_text_input("answer.md", "candidate A")    # file contents
    read_text_input("-", "task")                   # stdin
    read_text_input("run.json", "candidate")       # its "text"/"output"/... field, or messages

JSON objects give their first text-like field; chat-message lists are rendered role by role.
The file is read by ``veriscale.data.reader`` (regular files only, a size cap, UTF-8, JSON limits).
"""

from __future__ import annotations

import json
from typing import Any

from veriscale.data.reader import parse_json, read_text
from veriscale.errors import UserError

TEXT_FIELDS = ("text", "content", "output", "answer", "response", "final_output", "completion", "instruction", "task")


def _from_json(data: Any) -> str | None:
    if isinstance(data, str):
        return data
    if isinstance(data, dict):
        for name in TEXT_FIELDS:
            if isinstance(data.get(name), str):
                return data[name]
        if isinstance(data.get("messages"), list):
            return _from_json(data["messages"])
        return None
    if isinstance(data, list) and data and all(isinstance(m, dict) and "role" in m for m in data):
        return "\n\n".join(f"[{m['role']}] {m.get('content') or ''}" for m in data)
    return None


def read_text_input(source: str, what: str) -> str:
    """The text behind ``source``; an unreadable, oversized, non-UTF-8 or empty input raises a UserError."""
    raw = read_text(source, what, fix="save it to a regular file first, or pipe it in as -")
    name = "stdin" if source == "-" else source
    label = f"{what} from stdin" if source == "-" else f"{what} file '{source}'"
    text = raw
    if name.endswith(".json") or (name == "stdin" and raw.lstrip().startswith(("{", "["))):
        try:
            data = parse_json(raw, label)
        except json.JSONDecodeError as exc:
            if name.endswith(".json"):
                raise UserError(f"{label} is not valid JSON (line {exc.lineno}): fix it or pass plain text") from None
            data = None
        if data is not None:
            extracted = _from_json(data)
            text = extracted if extracted is not None else json.dumps(data, indent=2, ensure_ascii=False)
    if not text.strip():
        raise UserError(f"{what} from '{name}' is empty: give it the text to verify")
    return text
