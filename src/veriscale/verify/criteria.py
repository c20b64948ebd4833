"""Criteria: what "good" is decomposed into. Markdown, one heading per criterion.

A criteria file looks like::

    # Title (optional)
    A note shown with every criterion (optional).

    ## Correctness
    What this criterion checks...

    ## Completeness
    ...

Criteria are ``##`` headings when the file has any, else ``#`` headings. Built-in sets:
``general`` (answers) and ``agent`` (coding/terminal trajectories: specification, output,
errors)::

    crits = load_criteria("agent")            # or a path to your own .md file
    [c.name for c in crits.items]             # ['Specification', 'Output', 'Errors']
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from veriscale.data.reader import read_text
from veriscale.errors import UserError

BUILTIN = ("general", "agent")
_HEADING = re.compile(r"^(#{1,2})\s+(\S.*?)\s*#*\s*$")


@dataclass(frozen=True)
class Criterion:
    name: str
    description: str


@dataclass(frozen=True)
class CriteriaSet:
    name: str
    note: str
    items: tuple[Criterion, ...]

    def only(self, names: list[str]) -> "CriteriaSet":
        """The subset with these names (case-insensitive); unknown names raise a UserError."""
        by_name = {c.name.lower(): c for c in self.items}
        missing = [n for n in names if n.lower() not in by_name]
        if missing:
            raise UserError(
                f"criterion '{missing[0]}' is not in criteria set '{self.name}': choose from "
                + ", ".join(c.name for c in self.items)
            )
        return CriteriaSet(self.name, self.note, tuple(by_name[n.lower()] for n in names))


def parse_criteria(text: str, name: str) -> CriteriaSet:
    """Parse Markdown criteria; a file with no heading-level criteria raises a UserError."""
    lines = text.splitlines()
    levels = [len(m.group(1)) for line in lines if (m := _HEADING.match(line))]
    if not levels:
        raise UserError(f"criteria file '{name}' has no criteria: write one '## Name' heading per criterion followed by its description")
    level = 2 if 2 in levels else 1
    note_lines: list[str] = []
    items: list[tuple[str, list[str]]] = []
    for line in lines:
        m = _HEADING.match(line)
        if m and len(m.group(1)) == level:
            items.append((m.group(2).strip(), []))
        elif m and len(m.group(1)) < level:
            continue  # the title
        elif items:
            items[-1][1].append(line)
        else:
            note_lines.append(line)
    crits = tuple(Criterion(n, "\n".join(body).strip()) for n, body in items)
    seen: set[str] = set()
    for crit in crits:
        if crit.name.lower() in seen:
            raise UserError(f"criterion '{crit.name}' appears twice in '{name}': give each criterion one heading")
        seen.add(crit.name.lower())
    empty = [c.name for c in crits if not c.description]
    if empty:
        raise UserError(f"criterion '{empty[0]}' in '{name}' has no description: write what it checks under its heading")
    return CriteriaSet(name, "\n".join(note_lines).strip(), crits)


def load_criteria(spec: str) -> CriteriaSet:
    """A built-in set by name (``general``, ``agent``) or a Markdown file path."""
    if spec in BUILTIN:
        text = resources.files("veriscale.verify").joinpath(f"criteria/{spec}.md").read_text("utf-8")
        return parse_criteria(text, spec)
    path = Path(spec)
    if not path.exists():
        raise UserError(f"criteria '{spec}' is neither a built-in set ({', '.join(BUILTIN)}) nor an existing file: pass one of those or a path to a .md file")
    text = read_text(path, "criteria file")
    return parse_criteria(text, str(path))
