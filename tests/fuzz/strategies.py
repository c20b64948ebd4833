"""The bad-input generator shared by the fuzz suites: nasty strings, JSON values, JSON text that
Python's json cannot write (5,000-digit numbers, lone surrogate escapes, 100,000-deep nesting),
mutations of well-formed records, and byte-level corruption.

Hypothesis draws a seed and a small pool of generated strings; the rest is built by a seeded
``random.Random`` (``Gen``), which is a hundred times faster than drawing every node through
hypothesis and keeps each example reproducible from its seed::

    @given(gen=gens())
    def test_x(gen):
        text = dumps(gen.mutate(gen.json()))          # a mutated JSON document as text
        data = gen.corrupt(text.encode())             # then bad UTF-8, a cut, a BOM...

``Raw`` marks a token written into the JSON text as it is.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st


@dataclass(frozen=True)
class Raw:
    """JSON text placed as is (a number json.dumps cannot write, an escape, a deep nest)."""

    text: str

    def __repr__(self) -> str:  # short: hypothesis prints examples
        return f"Raw({self.text[:24]!r}{'...' if len(self.text) > 24 else ''} {len(self.text)} chars)"


class Blob(bytes):
    """File content whose repr is short (hypothesis prints every failing example)."""

    def __repr__(self) -> str:
        return f"Blob({bytes(self[:60])!r}{'...' if len(self) > 60 else ''} {len(self)} bytes)"


DEEP = 100_000
RAW_TOKENS = [
    Raw("1" + "0" * 5000), Raw("-" + "9" * 4301), Raw("1e999999"), Raw("-1e-999999"), Raw("NaN"), Raw("Infinity"),
    Raw("-Infinity"), Raw("123456789012345678901234567890"), Raw('"\\ud800"'), Raw('"\\udfff tail"'),
    Raw('"a\\ud83d"'), Raw('"\\ud83d\\ude00"'), Raw('"\\u0000"'), Raw("[" * DEEP + "]" * DEEP),
    Raw('{"a":' * 3000 + "1" + "}" * 3000), Raw("[" * 990 + "]" * 990), Raw("[" * 150 + "{}" + "]" * 150),
    Raw('"' + "x" * 200_000 + '"'), Raw("0.1e-400"), Raw("-0"), Raw("1E400"),
]

NASTY_STRINGS = [
    "", " ", "\n", "\r\n", "\t", "\x00", "a\x00b", "\ud800", "x\udfffy", "\ufeff", "\u202e", "\u2028", "💥", "é",
    "[/]", "[bold]x[/bold]", "[red", "{}", "{0}", "%s", "\\", "'", '"', "null", "true", "-1", "0", "9" * 30,
    "9" * 5000, "- item", "---", "# Heading", "## ", "```", "<returncode>99999999999999999999999</returncode>",
    "exit code: 123456789012345678901234567890", '{"returncode": 1e400}', "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b",
    "Please solve this issue: <pr_description>" + "x" * 30 + "</pr_description>", "x" * 5000,
    "\u2039max_calls\u203a", "\u2039\u2016\u203a", "../../etc/passwd", "/dev/null", "--help", "-", "a\nb",
]
NUMBERS = [0, -1, 1, 2, 7, 2 ** 31, 2 ** 63, -(2 ** 63) - 1, 10 ** 30, 1e308, 5e-324, 0.5, -0.0, 3.14]
KEYS = ["role", "content", "type", "text", "id", "steps", "messages", "value", "\n", "\ud800", "[/]", ""]


class Gen:
    """A seeded generator of bad values; ``pool`` adds strings hypothesis generated."""

    def __init__(self, seed: int, pool: list[str]) -> None:
        self.rng = random.Random(seed)
        self.pool = pool + NASTY_STRINGS
        self.seed = seed

    def __repr__(self) -> str:
        return f"Gen(seed={self.seed}, pool={self.pool[:len(self.pool) - len(NASTY_STRINGS)]!r})"

    # -- leaves -------------------------------------------------------------------------------
    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def choice(self, values: list[Any]) -> Any:
        return values[self.rng.randrange(len(values))]

    def text(self) -> str:
        return self.choice(self.pool)

    def short(self) -> str:
        """A generated string of at most 40 characters (nasty ones included)."""
        text = self.text()
        return text if len(text) <= 40 else text[:40]

    def number(self) -> Any:
        roll = self.rng.random()
        if roll < 0.4:
            return self.rng.randint(-5, 50)
        if roll < 0.7:
            return self.choice(NUMBERS)
        return self.rng.uniform(-1e6, 1e6)

    def leaf(self) -> Any:
        roll = self.rng.random()
        if roll < 0.1:
            return None
        if roll < 0.2:
            return self.chance(0.5)
        if roll < 0.45:
            return self.number()
        if roll < 0.9:
            return self.text()
        return self.choice(RAW_TOKENS)

    def json(self, depth: int = 0) -> Any:
        """Any JSON value (with ``Raw`` tokens), at most a few levels deep."""
        roll = self.rng.random()
        if depth >= 3 or roll < 0.55:
            return self.leaf()
        size = self.rng.randint(0, 3)
        if roll < 0.75:
            return [self.json(depth + 1) for _ in range(size)]
        return {self.choice(KEYS + self.pool[:4]): self.json(depth + 1) for _ in range(size)}

    # -- mutations ----------------------------------------------------------------------------
    def mutate(self, value: Any, depth: int = 0) -> Any:
        """``value`` with some parts replaced by other JSON, dropped, duplicated or wrapped."""
        roll = self.rng.random()
        if roll < 0.06:
            return self.json()
        if roll < 0.09:
            how = self.rng.randrange(3)
            return [value] if how == 0 else {"value": value} if how == 1 else dumps(value)
        if isinstance(value, dict):
            out = {key: self.mutate(item, depth + 1) for key, item in value.items() if not self.chance(0.08)}
            for _ in range(self.rng.randint(0, 1) if self.chance(0.2) else 0):
                out[self.choice(KEYS + self.pool[:2])] = self.json()
            return out
        if isinstance(value, list):
            items = [self.mutate(item, depth + 1) for item in value]
            if items and self.chance(0.1):
                items = items * self.rng.randint(2, 4)
            if self.chance(0.15):
                items.insert(self.rng.randint(0, len(items)), self.json())
            return items
        return value

    def corrupt(self, data: bytes) -> bytes:
        """``data`` unchanged, or cut, or with bytes that are not UTF-8, a BOM, or NUL bytes spliced in."""
        roll = self.rng.random()
        if roll < 0.7:
            return data
        at = self.rng.randint(0, len(data))
        kind = self.choice(["cut", "bad-utf8", "bom", "splice", "empty", "binary"])
        if kind == "cut":
            return data[:at]
        if kind == "bad-utf8":
            return data[:at] + self.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80", b"\xf8\x88\x80\x80\x80"]) + data[at:]
        if kind == "bom":
            return b"\xef\xbb\xbf" + data
        if kind == "splice":
            return data[:at] + self.rng.randbytes(self.rng.randint(1, 8)) + data[at:]
        if kind == "empty":
            return self.choice([b"", b" ", b"\n\n", b"\xef\xbb\xbf"])
        return self.rng.randbytes(self.rng.randint(0, 64))


@st.composite
def gens(draw) -> Gen:
    """A ``Gen`` from a drawn seed and a pool of hypothesis-generated strings."""
    return Gen(draw(st.integers(0, 2 ** 32 - 1)), draw(st.lists(st.text(max_size=30), min_size=1, max_size=6)))


def dumps(value: Any) -> str:
    """``value`` as JSON text, ``Raw`` tokens and lone surrogates written as they are."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(dumps(v) for v in value) + "]"
    return json.dumps(value)  # ensure_ascii: a lone surrogate becomes its \\udXXX escape
