"""Fuzz the two Markdown parsers users feed by hand: criteria files (``verify/criteria.py``) and
skill front matter (``harness/skills/library.py``), as text and as files (bad UTF-8, FIFOs).

Property: a parse gives a usable result (criteria with names and descriptions; a skill with its
required keys) or a ``UserError`` of one sentence; never another exception, never past the guard.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import given

from tests.fuzz.files import encode
from tests.fuzz.guard import REFUSED, outcome, run_one
from tests.fuzz.profile import fuzz_settings
from tests.fuzz.strategies import Gen, gens
from veriscale.errors import UserError
from veriscale.harness.skills.library import STAGES, parse_frontmatter, read_skill
from veriscale.verify.criteria import load_criteria, parse_criteria


def _criteria_line(gen: Gen) -> str:
    roll = gen.rng.random()
    if roll < 0.25:
        return gen.choice(["#", "##", "###", "#" * 7, " ##", "##\t"]) + gen.choice([" ", "", "  "]) + gen.short() \
            + gen.choice(["", " ##", " #", "#"])
    if roll < 0.35:
        return ""
    return gen.text()


def criteria_text(gen: Gen) -> str:
    return "\n".join(_criteria_line(gen) for _ in range(gen.rng.randint(0, 12)))


@fuzz_settings(2600)
@given(gen=gens())
def test_a_criteria_file_parses_into_criteria_or_is_refused_in_one_sentence(gen):
    text = criteria_text(gen)
    names = [gen.short() for _ in range(gen.rng.randint(0, 2))]
    what = f"parse_criteria({text[:300]!r}).only({names!r})"

    def parse():
        crits = parse_criteria(text, "fuzz.md")
        assert crits.items and all(c.name and c.description for c in crits.items), crits
        return crits.only(names) if names else crits

    if run_one("criteria", what, parse, (UserError,)) is not REFUSED:
        outcome("criteria", "accepted")


@fuzz_settings(300)
@given(gen=gens())
def test_a_criteria_path_is_read_or_refused_in_one_sentence(gen):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / gen.choice(["c.md", "c.txt", "c"])
        kind = gen.choice(["file"] * 6 + ["fifo", "dir", "missing", "devzero"])
        if kind == "file":
            path.write_bytes(gen.corrupt(encode(criteria_text(gen))))
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "dir":
            path.mkdir()
        elif kind == "devzero":
            path.symlink_to("/dev/zero")
        what = f"load_criteria({kind} {path.name})"
        if run_one("criteria", what, lambda: load_criteria(str(path)), (UserError,)) is not REFUSED:
            outcome("criteria", "accepted")


def _value(gen: Gen) -> str:
    roll = gen.rng.random()
    if roll < 0.4:
        return gen.short()
    if roll < 0.55:
        quote = gen.choice(["'", '"'])
        return quote + gen.short() + gen.choice([quote, ""])
    if roll < 0.8:
        return "[" + ", ".join(gen.choice(['"*.xlsx"', "*.md", "", "'a'", gen.short()]) for _ in range(gen.rng.randint(0, 3))) \
            + gen.choice(["]", "", "]]"])
    return ""


def skill_text(gen: Gen, name: str) -> str:
    stage = gen.choice(list(STAGES) + ["nope"])
    lines = [gen.choice(["---", "---", "---", " ---", "--", ""])]
    fields = {"name": name, "description": gen.short() or "d", "phase": stage, "applies-to": '["*"]'}
    for key in gen.rng.sample(sorted(fields) + ["stage", "applies_to", "extra", gen.short()], gen.rng.randint(0, 6)):
        value = fields.get(key, _value(gen)) if gen.chance(0.7) else _value(gen)
        lines.append(f"{gen.choice(['', '', ' '])}{key}{gen.choice([':', ':', ' :', ''])} {value}")
        if value == "" and gen.chance(0.7):
            lines += [f"{gen.choice(['  ', ''])}- {gen.choice(['*.csv', '', gen.short()])}" for _ in range(gen.rng.randint(0, 3))]
        if gen.chance(0.1):
            lines.append(gen.choice(["# comment", "", gen.text()]))
    if gen.chance(0.85):
        lines.append("---")
    lines += [gen.text() for _ in range(gen.rng.randint(0, 3))]
    return "\n".join(lines)


@fuzz_settings(2600)
@given(gen=gens())
def test_skill_front_matter_parses_or_is_refused_in_one_sentence(gen):
    text = skill_text(gen, gen.choice(["evidence-x", "resolve-y", gen.short()]))
    what = f"parse_frontmatter({text[:300]!r})"

    def parse():
        fields, body = parse_frontmatter(text, Path("SKILL.md"))
        assert isinstance(fields, dict) and isinstance(body, str)
        return fields

    if run_one("skills", what, parse, (UserError,)) is not REFUSED:
        outcome("skills", "accepted")


def _file_name(text: str) -> str:
    """``text`` as a folder name the file system takes (else ``x``)."""
    name = text.replace("/", "_").replace("\x00", "_")[:100]
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "x"
    return name if name not in ("", ".", "..") else "x"


@fuzz_settings(500)
@given(gen=gens())
def test_a_skill_folder_is_read_or_refused_in_one_sentence(gen):
    name = gen.choice(["evidence-xlsx", "repair-docs", "falsify-a", gen.short() or "x"])
    folder_name = name if gen.chance(0.7) else gen.choice(["evidence-other", "x"])
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / _file_name(folder_name)
        folder.mkdir(exist_ok=True)
        skill_file = folder / "SKILL.md"
        if gen.chance(0.05):
            os.mkfifo(skill_file)
        else:
            skill_file.write_bytes(gen.corrupt(encode(skill_text(gen, name))))
        if gen.chance(0.3):
            (folder / "scripts").mkdir()
            (folder / "scripts" / "run.py").write_text("print(1)\n")
        what = f"read_skill({folder.name}/SKILL.md)"

        def read():
            skill = read_skill(skill_file)
            assert skill.name and skill.description and skill.phase in STAGES and skill.applies_to and skill.body.strip()
            return skill

        if run_one("skills", what, read, (UserError,)) is not REFUSED:
            outcome("skills", "accepted")
