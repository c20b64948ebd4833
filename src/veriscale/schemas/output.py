"""What every ``--json`` output (and every tool that returns one: the MCP server) is shaped like: its
``"schema"`` id first, strict JSON numbers, and setting references spelled as flags::

    with_schema({"reward": 0.8}, "score")      # {"schema": "veriscale.score/1", "reward": 0.8}
    finite_data({"x": float("nan")})           # ({"x": None}, 1)
    cli_data({"note": text_naming_a_setting})  # the setting spelled as its flag
"""

from __future__ import annotations

import math
from typing import Any

from veriscale.settings.words import cli_text


def cli_data(payload: Any) -> Any:
    """``payload`` with every string's setting references spelled as flags (notes, errors...)."""
    if isinstance(payload, str):
        return cli_text(payload)
    if isinstance(payload, dict):
        return {key: cli_data(value) for key, value in payload.items()}
    if isinstance(payload, (list, tuple)):
        return [cli_data(value) for value in payload]
    return payload


def finite_data(payload: Any) -> tuple[Any, int]:
    """``payload`` with every NaN or infinite number as None, and how many there were (JSON has no
    NaN or Infinity: ``json.dumps`` would write ``NaN``, which no strict parser reads)."""
    if isinstance(payload, float):
        return (payload, 0) if math.isfinite(payload) else (None, 1)
    if isinstance(payload, dict):
        out, count = {}, 0
        for key, value in payload.items():
            out[key], n = finite_data(value)
            count += n
        return out, count
    if isinstance(payload, (list, tuple)):
        items = [finite_data(value) for value in payload]
        return [v for v, _ in items], sum(n for _, n in items)
    return payload, 0


SCHEMA_VERSION = 1


def schema_id(name: str) -> str:
    """The ``schema`` value a ``--json`` output of kind ``name`` carries: ``'veriscale.score/1'``.
    Each is described by ``src/veriscale/schemas/<name>.schema.json`` (docs/JSON.md)."""
    return f"veriscale.{name}/{SCHEMA_VERSION}"


def with_schema(payload: Any, name: str | None) -> Any:
    """``payload`` with ``"schema": schema_id(name)`` as its first key; a list gets it on each object
    it holds (as a JSONL file gets it on each line). Existing fields are kept as they are."""
    if name is None:
        return payload
    if isinstance(payload, dict):
        return {"schema": schema_id(name), **{k: v for k, v in payload.items() if k != "schema"}}
    if isinstance(payload, (list, tuple)):
        return [with_schema(item, name) if isinstance(item, dict) else item for item in payload]
    return payload
