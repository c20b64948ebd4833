"""Skill proposals: what an evolve session suggests, checked and shown as a reviewable diff.

The session answers with one JSON object::

    {"proposals": [{"skill": "falsify-units", "addresses": ["data_cleanup"],
                    "why": "figures were reported in cents", "skill_md": "---\\nname: falsify-units\\n...",
                    "script": {"name": "units.py", "text": "..."}}]}     # script optional

Usage::

    proposals = parse_proposals(reply_text)               # UserError when the reply holds no such object
    review = review_proposal(proposals[0], current, failure_ids={"data_cleanup"}, values=forbidden)
    review.accepted, review.problems, review.leaks, review.diff

A proposal is rejected when its SKILL.md is not a valid skill of that name, when it names no
failure it addresses (or one that is not among the failures), or when the leak check
(:mod:`.leak_check`) finds a forbidden value anywhere in it (SKILL.md, script, why).
"""

from __future__ import annotations

import difflib
import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veriscale.errors import UserError
from veriscale.harness.evolve.leak_check import ForbiddenValues, Leak
from veriscale.harness.skills.library import SKILL_FILE, read_skill

_SCRIPT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\.(py|sh)")
MAX_SKILL_CHARS = 20_000
MAX_SCRIPT_CHARS = 60_000


@dataclass(frozen=True)
class Proposal:
    """One proposed new or changed skill."""

    skill: str
    addresses: tuple[str, ...]
    why: str
    skill_md: str
    script_name: str | None = None
    script_text: str | None = None

    def texts(self) -> dict[str, str]:
        """Every part the leak check reads, by name."""
        parts = {"SKILL.md": self.skill_md, "why": self.why, "skill name": self.skill}
        if self.script_text is not None:
            parts[f"script {self.script_name}"] = self.script_text
            parts["script name"] = self.script_name or ""
        return parts


@dataclass
class Review:
    """The verdict on one proposal: its diff, and why it was rejected (problems, leaks)."""

    proposal: Proposal
    diff: str
    previous: str  # "new", "builtin", a user folder, or "v3" (the latest evolved version)
    problems: list[str] = field(default_factory=list)
    leaks: list[Leak] = field(default_factory=list)

    @property
    def accepted(self) -> bool:
        return not self.problems and not self.leaks

    def reason(self) -> str:
        parts = list(self.problems)
        if self.leaks:
            parts.append("it contains values the grader, the archive or the answer keys hold: "
                         + "; ".join(leak.sentence() for leak in self.leaks))
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"skill": self.proposal.skill, "addresses": list(self.proposal.addresses), "why": self.proposal.why,
                "accepted": self.accepted, "previous": self.previous, "problems": self.problems,
                "leaks": [{"value": leak.value, "found": leak.found, "source": leak.source} for leak in self.leaks],
                "diff": self.diff if self.accepted else None,
                "script": self.proposal.script_name}


def _objects(text: str) -> list[Any]:
    decoder = json.JSONDecoder()
    found, index = [], 0
    while (start := text.find("{", index)) >= 0:
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            index = start + 1
            continue
        found.append(value)
        index = end
    return found


def parse_proposals(reply: str) -> list[Proposal]:
    """The proposals in a session's reply; ``UserError`` when it holds no ``{"proposals": [...]}`` object."""
    for obj in _objects(reply or ""):
        if isinstance(obj, dict) and isinstance(obj.get("proposals"), list):
            return [_proposal(item, n) for n, item in enumerate(obj["proposals"], start=1)]
    raise UserError("the evolve session's reply holds no JSON object with a \"proposals\" list: "
                    "rerun, or use a model that follows the output format")


def _proposal(item: Any, n: int) -> Proposal:
    if not isinstance(item, dict):
        raise UserError(f"proposal {n} of the evolve session is not a JSON object: rerun the session")
    skill, skill_md = item.get("skill"), item.get("skill_md")
    if not isinstance(skill, str) or not isinstance(skill_md, str):
        raise UserError(f"proposal {n} of the evolve session needs string \"skill\" and \"skill_md\" fields: rerun the session")
    addresses = item.get("addresses") or []
    if isinstance(addresses, str):
        addresses = [addresses]
    script = item.get("script") if isinstance(item.get("script"), dict) else None
    return Proposal(skill=skill.strip(), addresses=tuple(str(a) for a in addresses if str(a).strip()),
                    why=str(item.get("why") or ""), skill_md=skill_md,
                    script_name=str(script.get("name")) if script and script.get("name") else None,
                    script_text=str(script.get("text")) if script and script.get("text") is not None else None)


def _check_skill(proposal: Proposal) -> str | None:
    """None when ``skill_md`` reads as a valid skill named ``skill``, else the problem."""
    if not re.fullmatch(r"[a-z]+-[a-z0-9][a-z0-9-]{0,63}", proposal.skill):
        return f"skill name {proposal.skill!r} is not <phase>-<name> in lower case"
    if len(proposal.skill_md) > MAX_SKILL_CHARS:
        return f"SKILL.md is {len(proposal.skill_md)} characters, over {MAX_SKILL_CHARS}"
    with tempfile.TemporaryDirectory(prefix="veriscale-evolve-") as scratch:
        path = Path(scratch) / proposal.skill / SKILL_FILE
        path.parent.mkdir()
        path.write_text(proposal.skill_md, encoding="utf-8")
        try:
            read_skill(path)
        except UserError as exc:
            return "its SKILL.md is not a valid skill: " + str(exc).replace(str(path), f"{proposal.skill}/{SKILL_FILE}")
    return None


def skill_diff(skill: str, before: str, after: str, *, header: list[str]) -> str:
    """A unified diff of ``SKILL.md`` from ``before`` to ``after``, under ``#`` header lines."""
    body = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                fromfile=f"a/{skill}/{SKILL_FILE}" if before else "/dev/null",
                                tofile=f"b/{skill}/{SKILL_FILE}")
    text = "".join(line if line.endswith("\n") else line + "\n" for line in body)
    return "".join(f"# {line}\n" for line in header) + text


def review_proposal(proposal: Proposal, current: tuple[str, str] | None, *, failure_ids: set[str],
                    values: ForbiddenValues) -> Review:
    """Check one proposal and build its diff against ``current`` (``(where, SKILL.md text)``, None: new)."""
    previous, before = current if current is not None else ("new", "")
    header = [f"proposal: {'change' if current else 'new skill'} {proposal.skill} (was: {previous})",
              f"addresses: {', '.join(proposal.addresses) or '(none named)'}"]
    if proposal.why:
        header.append("why: " + " ".join(proposal.why.split())[:400])
    if proposal.script_name:
        header.append(f"script: scripts/{proposal.script_name}")
    review = Review(proposal, skill_diff(proposal.skill, before, proposal.skill_md, header=header), previous)
    problem = _check_skill(proposal)
    if problem:
        review.problems.append(problem)
    if not proposal.addresses:
        review.problems.append("it names no failure it addresses")
    unknown = [a for a in proposal.addresses if a not in failure_ids]
    if unknown:
        review.problems.append(f"it names failures that are not among those analysed: {', '.join(unknown)}")
    if proposal.script_text is not None:
        if not proposal.script_name or not _SCRIPT_NAME.fullmatch(proposal.script_name):
            review.problems.append(f"its script name {proposal.script_name!r} is not a plain file name ending .py or .sh")
        elif len(proposal.script_text) > MAX_SCRIPT_CHARS:
            review.problems.append(f"its script is over {MAX_SCRIPT_CHARS} characters")
    if current is not None and before == proposal.skill_md:
        review.problems.append("it changes nothing")
    for text in proposal.texts().values():
        for leak in values.find(text):
            if all(leak.value != seen.value for seen in review.leaks):
                review.leaks.append(leak)
    return review
