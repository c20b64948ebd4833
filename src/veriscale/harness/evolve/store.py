"""The versioned store of evolved skills under ``--out``.

Each accepted proposal becomes a new version of its skill; the skill's folder always holds the
latest one, so ``harness run --skills OUT`` loads it as it is::

    OUT/falsify-units/SKILL.md                       # the latest version (a skill folder the library reads)
    OUT/falsify-units/scripts/units.py               # its script, if it has one
    OUT/falsify-units/versions/v1/SKILL.md           # every version, never rewritten
    OUT/falsify-units/versions/v1/scripts/units.py
    OUT/falsify-units/versions/v1/origin.json        # where it came from (below)
    OUT/falsify-units/versions/v1/proposal.diff      # the reviewed diff, naming the failures it addresses

``origin.json``: ``{"skill", "version", "previous", "runs", "failures": [{"id", "task", "run", "score"}],
"model", "created", "why", "injection"}`` (the failures' feedback is not copied: it may hold answers).

Usage::

    where, text = current_skill(out, "repair-report", skills_dirs)   # ("v2", ...), ("builtin", ...) or None
    version = accept(out, review, origin)                            # 3: OUT/repair-report/versions/v3/
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from veriscale.harness.evolve.proposals import Review
from veriscale.harness.jsonfiles import write_json
from veriscale.harness.safe_write import make_plain_dir, remove_tree, write_plain_file
from veriscale.harness.skills.library import BUILTIN_SKILLS_DIR, SCRIPTS_DIR, SKILL_FILE, all_skills

VERSIONS_DIR = "versions"
ORIGIN_FILE = "origin.json"
DIFF_FILE = "proposal.diff"
_VERSION = re.compile(r"v(\d+)")


def versions(out: Path, skill: str) -> list[int]:
    """The version numbers stored for ``skill`` under ``out``, ascending."""
    folder = Path(out) / skill / VERSIONS_DIR
    if not folder.is_dir():
        return []
    return sorted(int(m.group(1)) for entry in folder.iterdir() if (m := _VERSION.fullmatch(entry.name)))


def current_skill(out: Path, skill: str, skills_dirs: list[Path] | None = None) -> tuple[str, str] | None:
    """``(where, SKILL.md text)`` of the skill a proposal changes: its latest evolved version, else the
    built-in or user skill of that name; None for a new skill."""
    stored = versions(out, skill)
    if stored and (Path(out) / skill / SKILL_FILE).is_file():
        return f"v{stored[-1]}", (Path(out) / skill / SKILL_FILE).read_text(encoding="utf-8")
    known = all_skills(skills_dirs).get(skill)
    if known is None:
        return None
    where = "builtin" if known.folder.parent == BUILTIN_SKILLS_DIR else str(known.folder.parent)
    return where, known.path.read_text(encoding="utf-8")


def accept(out: Path, review: Review, origin: dict[str, Any]) -> int:
    """Store an accepted proposal as the next version of its skill and make it the latest; returns the version."""
    assert review.accepted, "only an accepted proposal is stored"
    proposal = review.proposal
    skill_dir = Path(out) / proposal.skill
    version = (versions(out, proposal.skill) or [0])[-1] + 1
    target = skill_dir / VERSIONS_DIR / f"v{version}"
    make_plain_dir(target)
    _write_skill(target, review)
    write_plain_file(target / DIFF_FILE, review.diff.encode("utf-8"))
    write_json(target / ORIGIN_FILE, {"skill": proposal.skill, "version": version, "previous": review.previous,
                                      "addresses": list(proposal.addresses), "why": proposal.why, **origin})
    if (skill_dir / SCRIPTS_DIR).exists():  # the latest version's scripts only
        remove_tree(skill_dir / SCRIPTS_DIR)
    _write_skill(skill_dir, review)
    return version


def _write_skill(folder: Path, review: Review) -> None:
    proposal = review.proposal
    make_plain_dir(folder)
    write_plain_file(folder / SKILL_FILE, proposal.skill_md.encode("utf-8"))
    if proposal.script_text is not None and proposal.script_name:
        make_plain_dir(folder / SCRIPTS_DIR)
        write_plain_file(folder / SCRIPTS_DIR / proposal.script_name, proposal.script_text.encode("utf-8"), 0o755)
