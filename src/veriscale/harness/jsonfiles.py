"""JSON files the harness writes and reads: atomic writes, tolerant reads, packaged schemas.

Usage::

    write_json(run_dir / "outcome.json", {"outcome": "delivered"})   # new file, then rename (no link followed)
    read_json(run_dir / "outcome.json")                              # None if missing or not JSON
    load_schema("veriscale.harness.protocol", "finish")              # <package>/schemas/finish.schema.json
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from veriscale.errors import UserError


def json_text(document: Any, **options: Any) -> str:
    """``document`` as indented UTF-8 JSON with a trailing newline (``options`` go to json.dumps)."""
    return json.dumps(document, indent=2, ensure_ascii=False, **options) + "\n"


def write_json(path: Path, document: Any, **options: Any) -> Path:
    """Write ``document`` to ``path`` through a ``.tmp`` sibling and a rename; makes parents."""
    from veriscale.harness.safe_write import write_plain_file

    path.parent.mkdir(parents=True, exist_ok=True)
    # a new file under a fixed-length temp name, renamed over ``path``: never written through a link
    write_plain_file(path, json_text(document, **options).encode("utf-8"))
    return path


def read_json(path: Path) -> Any | None:
    """The JSON in ``path``, or None when it is missing, unreadable, not JSON or past the JSON limits
    (``veriscale.data.reader.parse_json``: depth, number length)."""
    from veriscale.data.reader import parse_json

    try:
        return parse_json(path.read_text(encoding="utf-8"), f"'{path}'")
    except (OSError, ValueError, UserError):
        return None


def load_schema(package: str, name: str) -> dict[str, Any]:
    """The JSON schema ``<package>/schemas/<name>.schema.json`` shipped as package data."""
    text = resources.files(package).joinpath("schemas", f"{name}.schema.json").read_text("utf-8")
    return json.loads(text)
