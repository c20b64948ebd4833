"""The docs' example commands run as a new user would run them.

A fenced ``sh`` block in README.md or docs/*.md whose previous non-blank line is
``<!-- runs-in-ci -->`` runs here with ``bash -e`` in a fresh folder holding a copy of
``examples/`` (the store, config and data folders are that folder's own, as on a new machine), and
must exit 0 without a warning. A fenced block of any language after ``<!-- runs-in-ci: file NAME -->`` is first
written there as NAME (the steps file of docs/PROGRESS.md's follow example). Only commands that
finish in seconds are marked: pure ones (``settings``, ``harness skills list``) and the embedded
model on a few calls; the slow ones stay unmarked.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MARK = re.compile(r"^<!--\s*runs-in-ci(?::\s*file\s+(?P<file>[\w./-]+))?\s*-->\s*$")
FENCE = re.compile(r"^```(?P<lang>[\w-]*)\s*$")


@dataclass
class Block:
    doc: Path
    line: int
    lang: str
    text: str
    file: str | None  # written as this file; None: run it

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
        if mark is not None:
            if mark["file"] is None and fence["lang"] not in ("sh", "bash"):
                raise AssertionError(f"{doc.name}:{i + 1}: runs-in-ci marks a {fence['lang'] or 'plain'} block")
            blocks.append(Block(doc, i + 1, fence["lang"], "\n".join(lines[i + 1:end]) + "\n", mark["file"]))
        previous, i = "", end + 1
    return blocks


DOC_BLOCKS = {doc: blocks for doc in DOCS if (blocks := marked_blocks(doc))}


def _new_user_folder(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    work = tmp_path / "work"
    shutil.copytree(REPO / "examples", work / "examples")
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "veriscale").write_text(f"#!/bin/sh\nexec {sys.executable} -m veriscale \"$@\"\n")
    (shim / "veriscale").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERISCALE_")}
    env.update(PATH=f"{shim}{os.pathsep}{env.get('PATH', '')}", HOME=str(tmp_path / "home"),
               XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"),
               XDG_CACHE_HOME=os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache")),  # the model's files
               VERISCALE_STORE=str(tmp_path / "store.sqlite3"),
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO / "src"), os.environ.get("PYTHONPATH", "")) if p))
    return work, env


def test_some_examples_are_marked() -> None:
    names = {doc.name for doc in DOC_BLOCKS}
    assert {"README.md", "PROGRESS.md", "JSON.md"} <= names, names


@pytest.mark.embedded
@pytest.mark.parametrize("doc", list(DOC_BLOCKS), ids=lambda d: d.name)
def test_the_docs_examples_run(doc: Path, tmp_path: Path) -> None:
    work, env = _new_user_folder(tmp_path)
    for block in DOC_BLOCKS[doc]:
        if block.file is not None:
            (work / block.file).write_text(block.text, encoding="utf-8")
            continue
        proc = subprocess.run(["bash", "-e", "-c", block.text], cwd=work, env=env, capture_output=True, text=True,
                              timeout=180)
        assert proc.returncode == 0, f"{block.name} exited {proc.returncode}:\n{block.text}\n{proc.stderr[-3000:]}"
        assert "Traceback" not in proc.stderr, f"{block.name}:\n{proc.stderr[-3000:]}"
        # an example that warns (docs/PROGRESS.md's follow example skipped its own third line) is broken too
        assert "warning:" not in proc.stderr, f"{block.name} warned:\n{proc.stderr[-3000:]}"
