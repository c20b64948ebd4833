"""Hand-backs a hostile session makes from inside a real jail (issue 19, findings 3, 5, 6, 8).

Each test runs the session in the jail and checks the host copy afterwards. CI runs this file as
root and again as the unprivileged user (``test_unprivileged_pass.py``).

``VERISCALE_TEST_HANDBACK_FILES`` sets how many empty files the count test makes (CI default
25,000, past the 20,000-entry cap; the issue's full size is ``VERISCALE_TEST_HANDBACK_FILES=200000``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.harness.jail_probe import session_spec
from veriscale.harness.jail.harvest import MAX_DEPTH, MAX_ENTRIES
from veriscale.harness.jail.sandbox import check_jail_available, run_jailed
from veriscale.harness.safe_fs import walk_entries
from veriscale.harness.safe_write import remove_tree

HANDBACK_FILES = int(os.environ.get("VERISCALE_TEST_HANDBACK_FILES", "25000"))


@pytest.fixture(scope="module", autouse=True)
def jail_available() -> None:
    check_jail_available()


def py(spec, code: str, timeout_s: float = 120):
    import sys

    return run_jailed(spec, [sys.executable, "-c", code], timeout_s=timeout_s)


def test_a_hand_back_over_the_entry_cap_is_refused_with_its_reason(layout: dict[str, Path]) -> None:
    assert HANDBACK_FILES > MAX_ENTRIES, "set VERISCALE_TEST_HANDBACK_FILES above the cap"
    first = run_jailed(session_spec(layout), ["/bin/sh", "-c", "echo kept > kept.txt"], timeout_s=30)
    assert first.harvest is not None and first.harvest.ok
    result = py(session_spec(layout), f"""
import os
os.mkdir("many")
for i in range({HANDBACK_FILES}):
    open(f"many/{{i}}", "w").close()
open("kept.txt", "w").write("replaced")
""", timeout_s=300)
    assert result.returncode == 0, result.stderr
    assert result.harvest is not None and not result.harvest.ok
    assert f"more than {MAX_ENTRIES} files and folders" in result.harvest.error
    assert f"more than {MAX_ENTRIES}" in result.stderr  # the session is told why
    assert sorted(p.name for p in layout["out"].iterdir()) == ["kept.txt"]
    assert (layout["out"] / "kept.txt").read_text() == "kept\n"


def test_a_tree_2500_folders_deep_is_handed_back_cut_at_the_depth_cap_and_said_so(layout: dict[str, Path]) -> None:
    result = py(session_spec(layout), """
import os
open("top.txt", "w").write("top")
os.mkdir("deep"); os.chdir("deep")
for _ in range(2500):
    os.mkdir("a"); os.chdir("a")
open("bottom.txt", "w").write("bottom")
""")
    try:
        assert result.returncode == 0, result.stderr
        assert result.harvest is not None and result.harvest.ok, result.harvest
        assert (layout["out"] / "top.txt").read_text() == "top"
        depth = max(len(rel.parts) for rel, _ in walk_entries(layout["out"]))
        assert depth == MAX_DEPTH
        assert any(f"deeper than {MAX_DEPTH} folders" in line for line in result.harvest.left_out)
        assert f"deeper than {MAX_DEPTH} folders" in result.stderr
    finally:
        remove_tree(layout["out"])  # pytest's own cleanup recurses


def test_names_up_to_255_bytes_are_all_handed_back(layout: dict[str, Path]) -> None:
    names = ["n" * 241 + ".txt", "m" * 251 + ".txt", "é" * 125 + ".txt", "short.txt"]
    result = py(session_spec(layout), f"""
for name in {names!r}:
    open(name, "w").write(name[:3])
""")
    assert result.returncode == 0, result.stderr
    assert result.harvest is not None and result.harvest.ok, result.harvest
    assert sorted(p.name for p in layout["out"].iterdir()) == sorted(names)
    assert result.harvest.left_out == []


def test_c1_and_bidi_names_are_refused_and_reported(layout: dict[str, Path]) -> None:
    result = py(session_spec(layout), r"""
for name in ("csi\u009b2J.txt", "report\u202egnp.exe", "iso\u2066x\u2069.txt", "lrm\u200e.txt", "ok.txt"):
    open(name, "w").write("x")
""")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in layout["out"].iterdir()) == ["ok.txt"]
    assert result.harvest is not None and len(result.harvest.left_out) == 4
    assert "4 entries of the output folder not handed back" in result.stderr
    assert not any(ch in result.stderr for ch in "\u009b\u202e\u2066\u200e")


def test_hard_linked_names_are_dropped_and_reported(layout: dict[str, Path]) -> None:
    result = run_jailed(session_spec(layout), ["/bin/sh", "-c", "echo data > a.txt; ln a.txt b.txt; ln a.txt c.txt"],
                        timeout_s=30)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in layout["out"].iterdir()) == ["a.txt"]
    assert (layout["out"] / "a.txt").read_text() == "data\n" and (layout["out"] / "a.txt").stat().st_nlink == 1
    assert result.harvest is not None
    hard = [line for line in result.harvest.left_out if "hard link to 'a.txt'" in line]
    assert len(hard) == 2 and "b.txt" in hard[0] and "c.txt" in hard[1]
    assert "hard link to 'a.txt'" in result.stderr


def test_an_unreadable_file_is_left_out_alone(layout: dict[str, Path]) -> None:
    result = run_jailed(session_spec(layout), ["/bin/sh", "-c", "echo a > a.txt; echo b > b.txt; chmod 000 b.txt; "
                                                                "mkdir d; echo c > d/c.txt; chmod 000 d"], timeout_s=30)
    assert result.returncode == 0, result.stderr
    assert result.harvest is not None and result.harvest.ok, result.harvest
    assert (layout["out"] / "a.txt").read_text() == "a\n" and not (layout["out"] / "b.txt").exists()
    assert "'b.txt' not handed back" in result.stderr and "'d' not handed back" in result.stderr
