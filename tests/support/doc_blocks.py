"""Test helper: the fenced examples in README.md and docs/*.md that the suite runs as written.

A fenced block runs when its previous non-blank line is a mark:

- ``<!-- runs-in-ci -->`` (an ``sh``/``bash`` block): tests/test_docs_examples.py runs it with
  ``bash -e`` in a fresh folder;
- ``<!-- runs-in-ci: file NAME -->`` (any language): written there as NAME first;
- ``<!-- runs-in-ci: by tests/PATH.py -->``: the block needs an environment of its own (a served
  model, another virtualenv), so that test file runs it, in order, and the docs test checks the
  file exists and names the doc. A ``by`` mark may add ``file NAME``:
  ``<!-- runs-in-ci: by tests/integrations/test_x.py file task.py -->``::

    blocks = marked_blocks(REPO / "docs" / "INTEGRATIONS.md")
    mine = [b for b in blocks if b.by == "tests/integrations/test_inspect_provider.py"]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MARK = re.compile(r"^<!--\s*runs-in-ci(?::(?:\s*by\s+(?P<by>[\w./-]+\.py))?(?:\s*file\s+(?P<file>[\w./-]+))?)?\s*-->\s*$")
FENCE = re.compile(r"^```(?P<lang>[\w-]*)\s*$")


@dataclass
class Block:
    doc: Path
    line: int
    lang: str
    text: str
    file: str | None  # written as this file; None: run it
    by: str | None = None  # the test file that runs it; None: tests/test_docs_examples.py

    @property
    def name(self) -> str:
        return f"{self.doc.name}:{self.line}"


def marked_blocks(doc: Path) -> list[Block]:
    """The marked fenced blocks of ``doc``, in order."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    blocks, i, previous = [], 0, ""
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            if lines[i].strip():
                previous = lines[i].strip()
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        mark = MARK.match(previous)
        if mark is None and previous.startswith("<!--") and "runs-in-ci" in previous:
            raise AssertionError(f"{doc.name}:{i}: a runs-in-ci mark this reader does not understand: {previous}")
        if mark is not None:
            if mark["file"] is None and fence["lang"] not in ("sh", "bash"):
                raise AssertionError(f"{doc.name}:{i + 1}: runs-in-ci marks a {fence['lang'] or 'plain'} block")
            blocks.append(Block(doc, i + 1, fence["lang"], "\n".join(lines[i + 1:end]) + "\n", mark["file"],
                                mark["by"]))
        previous, i = "", end + 1
    return blocks


def blocks_run_by(test_file: str, doc: Path) -> list[Block]:
    """The blocks of ``doc`` whose mark names ``test_file`` (a path from the repo root), in order;
    AssertionError when there are none (a test that runs no example proves nothing)."""
    mine = [b for b in marked_blocks(doc) if b.by == test_file]
    assert mine, f"{doc.name} marks no block 'runs-in-ci: by {test_file}'"
    return mine
