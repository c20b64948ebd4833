"""The docs' example commands run as a new user would run them.

The marks are read by :mod:`tests.support.doc_blocks`. A fenced ``sh`` block after
``<!-- runs-in-ci -->`` runs here with ``bash -e`` in a fresh folder holding a copy of
``examples/`` (the store, config and data folders are that folder's own, as on a new machine), and
must exit 0 without a warning. A fenced block of any language after ``<!-- runs-in-ci: file NAME -->`` is first
written there as NAME (the steps file of docs/PROGRESS.md's follow example). Only commands that
finish in seconds are marked: pure ones (``settings``, ``harness skills list``) and the embedded
model on a few calls; the slow ones stay unmarked. A block marked ``runs-in-ci: by TEST`` needs an
environment of its own (a served model, DeepEval's virtualenv): that test runs it, and here it is
only checked that the test exists and reads this doc.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.doc_blocks import DOCS, REPO, marked_blocks

DOC_BLOCKS = {doc: blocks for doc in DOCS if (blocks := [b for b in marked_blocks(doc) if b.by is None])}
BY_BLOCKS = [b for doc in DOCS for b in marked_blocks(doc) if b.by is not None]


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


def test_blocks_run_by_another_test_name_a_test_that_reads_their_doc() -> None:
    for block in BY_BLOCKS:
        test = REPO / str(block.by)
        assert test.is_file(), f"{block.name} is run by {block.by}, which does not exist"
        text = test.read_text(encoding="utf-8")
        assert block.doc.name in text and "blocks_run_by" in text, f"{block.by} does not run {block.name}'s doc"


def test_an_unknown_mark_is_an_error_not_a_silent_skip(tmp_path: Path) -> None:
    doc = tmp_path / "X.md"
    doc.write_text("<!-- runs-in-ci: with inspect -->\n```sh\necho hi\n```\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="does not understand"):
        marked_blocks(doc)
    doc.write_text("<!-- runs-in-ci: by tests/x.py file a.py -->\n```python\nprint(1)\n```\n", encoding="utf-8")
    [block] = marked_blocks(doc)
    assert (block.by, block.file, block.lang) == ("tests/x.py", "a.py", "python")

