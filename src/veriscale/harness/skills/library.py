"""The skill library: short method texts (plus optional scripts) staged by protocol phase.

A skill is a folder ``<stage>-<name>/`` holding ``SKILL.md`` and, optionally, ``scripts/``::

    ---
    name: evidence-xlsx
    description: Read workbooks cell by cell, diff ranges across rollouts, recompute formulas.
    phase: evidence
    applies-to: ["*.xlsx", "*.xlsm"]
    ---
    When to use ... (markdown body)

Stages and the sessions that receive them (names from ``protocol.phases``):

====================  ==============================================
session               skills it gets
====================  ==============================================
``resolver``          ``evidence-*`` + ``resolve-*``
``challenger``        ``evidence-*`` + ``falsify-*``
``adjudication``      ``evidence-*`` only
``delivery``          ``evidence-*`` + ``repair-*``
====================  ==============================================

Usage::

    skills = load_skills("resolver", files=["model.xlsx", "notes.md"])
    skills = load_skills("delivery", dirs=[Path("my-skills")])   # user skills add or replace
    print(skill_index(skills))

Frontmatter is parsed here (``key: value``, ``[a, b]`` inline lists and ``- item`` block lists,
quoted or bare strings), so no YAML dependency is needed. ``stage`` is accepted as another name
for ``phase``. A skill in a later folder replaces a built-in or earlier skill of the same name.
Red line: skills hold methods, never task-specific answers.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Iterable

from veriscale.data.regular import read_regular_text
from veriscale.errors import UserError
from veriscale.harness.protocol.phases import SESSION_ALIASES, SESSION_STAGES, STAGES, session_for, stages_for  # noqa: F401 - re-exported

SKILL_FILE = "SKILL.md"
SCRIPTS_DIR = "scripts"
BUILTIN_SKILLS_DIR = Path(__file__).resolve().parent

_REQUIRED_KEYS = ("name", "description", "phase")
_KNOWN_KEYS = frozenset({"name", "description", "phase", "applies-to"})


@dataclass(frozen=True)
class Skill:
    """One skill: its frontmatter fields, its markdown body and its scripts."""

    name: str
    description: str
    applies_to: tuple[str, ...]
    phase: str
    path: Path
    body: str
    scripts: tuple[Path, ...] = field(default_factory=tuple)

    @property
    def folder(self) -> Path:
        """The skill folder (``SKILL.md`` and ``scripts/`` live here)."""
        return self.path.parent

    def applies(self, files: Iterable[str]) -> bool:
        """True when an ``applies-to`` glob matches one of ``files`` (by name or relative path)."""
        if "*" in self.applies_to:
            return True
        for file in files:
            posix = PurePosixPath(str(file).replace("\\", "/"))
            for pattern in self.applies_to:
                pattern = pattern.lower()
                if fnmatch.fnmatchcase(posix.name.lower(), pattern) or fnmatch.fnmatchcase(
                    posix.as_posix().lower(), pattern
                ):
                    return True
        return False


def _scalar(raw: str) -> str:
    text = raw.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _inline_list(raw: str, where: Path, key: str) -> list[str]:
    inner = raw.strip()[1:-1]
    items = [_scalar(part) for part in inner.split(",")] if inner.strip() else []
    if any(not item for item in items):
        raise UserError(f"skill file '{where}' has an empty item in '{key}': write e.g. {key}: [\"*.xlsx\"]")
    return items


def parse_frontmatter(text: str, where: Path) -> tuple[dict[str, str | list[str]], str]:
    """Split ``---``-fenced frontmatter from the body; ``UserError`` names ``where`` when bad."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise UserError(f"skill file '{where}' does not start with a '---' frontmatter fence: add name, description and phase")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise UserError(f"skill file '{where}' has no closing '---' after its frontmatter: close the block") from None
    fields: dict[str, str | list[str]] = {}
    current_list: str | None = None
    for number, line in enumerate(lines[1:end], start=2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        stripped = line.strip()
        if stripped.startswith("- ") and current_list is not None:
            item = _scalar(stripped[2:])
            if not item:
                raise UserError(f"skill file '{where}' line {number}: empty list item; remove it")
            value = fields[current_list]
            assert isinstance(value, list)
            value.append(item)
            continue
        if ":" not in stripped or line[:1].isspace():
            raise UserError(f"skill file '{where}' line {number} is not 'key: value': fix the frontmatter")
        key, raw = stripped.split(":", 1)
        key = key.strip().lower().replace("_", "-")
        if key == "stage":
            key = "phase"
        if key in fields:
            raise UserError(f"skill file '{where}' sets '{key}' twice: keep one")
        raw = raw.strip()
        current_list = None
        if raw.startswith("["):
            if not raw.endswith("]"):
                raise UserError(f"skill file '{where}' line {number}: inline list is not closed with ']'")
            fields[key] = _inline_list(raw, where, key)
        elif raw == "":
            fields[key] = []
            current_list = key
        else:
            fields[key] = _scalar(raw)
    body = "\n".join(lines[end + 1:]).strip() + "\n"
    return fields, body


def read_skill(skill_file: Path) -> Skill:
    """Read and check one ``SKILL.md``; every problem is a ``UserError`` naming the file."""
    text = read_regular_text(skill_file, "skill file")
    fields, body = parse_frontmatter(text, skill_file)
    unknown = sorted(set(fields) - _KNOWN_KEYS)
    if unknown:
        raise UserError(f"skill file '{skill_file}' has unknown key(s) {', '.join(unknown)}: use name, description, phase, applies-to")
    for key in _REQUIRED_KEYS:
        value = fields.get(key)
        if not isinstance(value, str) or not value:
            raise UserError(f"skill file '{skill_file}' needs a non-empty '{key}:' line in its frontmatter")
    name, description, stage = (str(fields[k]) for k in _REQUIRED_KEYS)
    if stage not in STAGES:
        raise UserError(f"skill file '{skill_file}' has phase '{stage}': use one of {', '.join(STAGES)}")
    if not name.startswith(f"{stage}-") or len(name) == len(stage) + 1:
        raise UserError(f"skill file '{skill_file}' is named '{name}': a {stage} skill's name must be '{stage}-<something>'")
    if skill_file.parent.name != name:
        raise UserError(f"skill file '{skill_file}' is named '{name}' but sits in folder '{skill_file.parent.name}': make them equal")
    applies = fields.get("applies-to", ["*"])
    if isinstance(applies, str):
        applies = [applies]
    if not applies:
        raise UserError(f"skill file '{skill_file}' has an empty 'applies-to': list globs or drop the key for all files")
    if not body.strip():
        raise UserError(f"skill file '{skill_file}' has no body: write the method below the frontmatter")
    scripts_dir = skill_file.parent / SCRIPTS_DIR
    scripts = tuple(sorted(p for p in scripts_dir.rglob("*") if p.is_file() and "__pycache__" not in p.parts)) if scripts_dir.is_dir() else ()
    return Skill(name=name, description=description, applies_to=tuple(applies), phase=stage,
                 path=skill_file, body=body, scripts=scripts)


def _skills_in(folder: Path) -> list[Skill]:
    if not folder.is_dir():
        raise UserError(f"skills folder '{folder}' does not exist: give a folder of <stage>-<name>/SKILL.md skills")
    return [read_skill(entry / SKILL_FILE) for entry in sorted(folder.iterdir())
            if entry.is_dir() and (entry / SKILL_FILE).is_file()]


def all_skills(dirs: list[Path] | None = None) -> dict[str, Skill]:
    """Built-in skills, then each folder of ``dirs`` in order (same name: the later one wins)."""
    merged: dict[str, Skill] = {}
    for folder in [BUILTIN_SKILLS_DIR, *[Path(d) for d in (dirs or [])]]:
        for skill in _skills_in(folder):
            merged[skill.name] = skill
    return merged


def load_skills(phase: str, dirs: list[Path] | None = None, files: list[str] | None = None) -> list[Skill]:
    """Skills a session of ``phase`` receives, sorted by stage then name.

    ``dirs`` adds user skill folders (a same-named skill replaces the built-in); ``files``
    (deliverable names or relative paths) keeps only skills whose ``applies-to`` matches one;
    ``None`` keeps all.
    """
    stages = stages_for(phase)
    chosen = [s for s in all_skills(dirs).values() if s.phase in stages]
    if files is not None:
        chosen = [s for s in chosen if s.applies(files)]
    return sorted(chosen, key=lambda s: (STAGES.index(s.phase), s.name))


def skill_index(skills: list[Skill], *, root: Path | None = None) -> str:
    """A short text index for a prompt: one block per skill with its file and scripts.

    With ``root`` (where the skills are mounted inside the jail), paths are shown under it.
    """
    blocks = []
    for skill in skills:
        folder = (root / skill.folder.name) if root is not None else skill.folder
        lines = [f"- {skill.name} ({skill.phase}): {skill.description}", f"  read: {folder / SKILL_FILE}"]
        for script in skill.scripts:
            lines.append(f"  script: python3 {folder / script.relative_to(skill.folder)}")
        blocks.append("\n".join(lines))
    return "\n".join(blocks) + ("\n" if blocks else "")


def skill_mounts(dirs: Iterable[Path]) -> list[Path]:
    """Folders a session must see read-only for its skills' scripts: built-ins first."""
    return list(dict.fromkeys([BUILTIN_SKILLS_DIR, *(Path(d) for d in dirs)]))
