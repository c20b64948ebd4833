"""Read a task or candidate given on the command line: a file (text, Markdown, JSON) or ``-``.

    read_text_input("answer.md", "candidate A")    # file contents
    read_text_input("-", "task")                   # stdin
    read_text_input("run.json", "candidate")       # its "text"/"output"/... field, or messages

JSON objects give their first text-like field; chat-message lists are rendered role by role.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

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
    """The text behind ``source``; an unreadable or empty input raises a UserError."""
    if source == "-":
        raw = sys.stdin.read()
        name = "stdin"
    else:
        path = Path(source)
        if not path.exists():
            raise UserError(f"{what} file '{source}' does not exist: check the path (use - to read stdin)")
        if path.is_dir():
            raise UserError(f"{what} '{source}' is a folder: pass a text, Markdown or JSON file")
        try:
            raw = path.read_text("utf-8")
        except UnicodeDecodeError:
            raise UserError(f"{what} file '{source}' is not UTF-8 text: convert it to text, Markdown or JSON") from None
        except OSError as exc:
            raise UserError(f"cannot read {what} file '{source}' ({exc.strerror}): check its permissions") from None
        name = source
    text = raw
    if name.endswith(".json") or (name == "stdin" and raw.lstrip().startswith(("{", "["))):
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            if name.endswith(".json"):
                raise UserError(f"{what} file '{source}' is not valid JSON (line {exc.lineno}): fix it or pass plain text") from None
            data = None
        if data is not None:
            extracted = _from_json(data)
            text = extracted if extracted is not None else json.dumps(data, indent=2, ensure_ascii=False)
    if not text.strip():
        raise UserError(f"{what} from '{name}' is empty: give it the text to verify")
    return text
