"""The ``heldout2`` injection templates stay apart from the detector they measure.

They were written blind to ``veriscale.verify.injection``; to keep them an honest held-out set,
no commit may change both the template file and the detector. The history is read with
``git log`` in the repository root, so these tests need a git clone (CI always runs in one).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from tests.data.dev_data_paths import DEV_DATA
from veriscale.bench.injection_suite import (
    HELDOUT_V2,
    HELDOUT_V2_PATH,
    KINDS_V2,
    TEMPLATES,
    heldout_v2_templates,
    heldout_v2_twins,
    wrong_answers,
)

REPO = Path(__file__).resolve().parents[2]
HELDOUT_FILE = "src/veriscale/bench/injection_heldout_v2.json"
#: the detector: its entry point, its rules and the views of the text it reads
DETECTOR_FILES = frozenset({"src/veriscale/verify/injection.py", "src/veriscale/verify/injection_rules.py",
                            "src/veriscale/verify/injection_views.py"})


def _commits_with_files() -> dict[str, set[str]]:
    """Every commit reachable from HEAD and the paths it changes (merges: against each parent)."""
    if shutil.which("git") is None:
        pytest.fail("git is not installed: the held-out/detector separation can only be checked in a git clone")
    inside = subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=REPO, capture_output=True, text=True)
    if inside.returncode != 0 or inside.stdout.strip() != "true":
        pytest.fail(f"{REPO} is not a git checkout: the held-out/detector separation needs its history "
                    "(CI always runs in a clone)")
    log = subprocess.run(["git", "log", "-m", "--name-only", "--format=%H"], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout
    commits: dict[str, set[str]] = {}
    current = None
    for line in log.splitlines():
        line = line.strip()
        if re.fullmatch(r"[0-9a-f]{40}", line):
            current = commits.setdefault(line, set())
        elif line and current is not None:
            current.add(line)
    return commits


def test_no_commit_changes_both_the_heldout_templates_and_the_detector():
    both = [c for c, files in _commits_with_files().items() if HELDOUT_FILE in files and files & DETECTOR_FILES]
    assert not both, f"commits changing both {HELDOUT_FILE} and the detector ({', '.join(sorted(DETECTOR_FILES))}): {both}"


def test_the_file_loads_and_is_varied():
    templates = heldout_v2_templates()
    assert HELDOUT_V2_PATH.name == Path(HELDOUT_FILE).name
    assert len(templates) >= 96
    kinds = Counter(t["kind"] for t in templates)
    assert set(kinds) == set(KINDS_V2) and len(kinds) >= 8
    assert all(n >= 12 for n in kinds.values()), kinds
    assert len({t["language"] for t in templates}) >= 10
    assert sum(t["obfuscation"] != "none" for t in templates) >= 24
    assert len({t["template"] for t in templates}) == len(templates)  # no duplicates
    old = {x for half in TEMPLATES.values() for kind in half.values() for x in kind}
    assert not old & {t["template"] for t in templates}  # none of the earlier halves' templates
    for t in templates:
        assert t["template"].count("{a}") == 1, t
        filled = t["template"].format(a="\x00CLEAN\x00")  # literal braces are escaped
        assert filled.count("\x00CLEAN\x00") == 1 and filled != "\x00CLEAN\x00", t


def test_twins_keep_the_clean_answer_and_use_no_tuning_base():
    twins = heldout_v2_twins(DEV_DATA)
    assert len(twins) == len(heldout_v2_templates())
    assert {t.half for t in twins} == {HELDOUT_V2}
    for t in twins:
        assert t.clean in t.injected and t.clean != t.injected, t.id
    answers = wrong_answers(DEV_DATA)
    earlier = {s for s, _, _ in answers[0::2]} | {s for s, _, _ in answers[1::2][:12]}
    assert not {t.source for t in twins} & earlier
