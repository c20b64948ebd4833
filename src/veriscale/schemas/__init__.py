"""JSON Schemas (draft 2020-12) of every ``--json`` output: ``<kind>.schema.json`` describes the
output whose top-level ``"schema"`` field is ``"veriscale.<kind>/1"`` (docs/JSON.md lists them).

Example::

    from jsonschema import validate
    from veriscale import schemas
    validate(doc, schemas.load(doc["schema"]))    # "veriscale.score/1" or plain "score"
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SUFFIX = ".schema.json"


def names() -> list[str]:
    """Every output kind with a schema: ``["bench", "bench.dry-run", ...]``."""
    return sorted(p.name[: -len(SUFFIX)] for p in HERE.glob(f"*{SUFFIX}"))


@cache
def _read(name: str) -> str:
    return (HERE / f"{name}{SUFFIX}").read_text(encoding="utf-8")


def load(name: str) -> dict[str, Any]:
    """The schema of kind ``name`` (``"score"``, or an output's ``"veriscale.score/1"``)."""
    kind = name.removeprefix("veriscale.").rsplit("/", 1)[0]
    if kind not in names():
        raise KeyError(f"no JSON schema for '{name}': known kinds are {', '.join(names())}")
    return json.loads(_read(kind))
