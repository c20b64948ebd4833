"""Criteria: what "good" is decomposed into. Markdown, one heading per criterion.

A criteria file looks like::

    # Title (optional)
    A note shown with every criterion (optional).

    ## Correctness
    What this criterion checks...

    ## Completeness
    ...

Criteria are ``##`` headings when the file has any, else ``#`` headings. A line ``> Why: ...``
right under a heading is the criterion's one-line rationale: shown by ``veriscale criteria show``,
never sent to the judge (so it changes no prompt and no cache key).

Packs (one per domain) are data: the built-in Markdown files in ``verify/criteria/`` (``general``
for answers; ``terminal`` for coding and terminal trajectories, also called ``agent``; ``swe``,
``web``, ``medical``, ``office``, ``robot``, ``math``), the ``NAME.md`` files of the folder the
``criteria_dir`` setting names, and packs plugins declare under the ``veriscale.criteria`` entry
point group (the object is a path to a Markdown file, or a function returning its text)::

    crits = load_criteria("terminal")         # or "agent", or a path to your own .md file
    [c.name for c in crits.items]             # ['Specification', 'Output', 'Errors']
    sorted(available_packs())                 # ['general', 'math', 'medical', ...]
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path

from veriscale.data.reader import read_text
from veriscale.errors import UserError, setting

#: the built-in packs (files ``verify/criteria/NAME.md``), and the other names they answer to
PACKS = ("general", "terminal", "swe", "web", "medical", "office", "robot", "math")
ALIASES = {"agent": "terminal"}
BUILTIN = PACKS + tuple(ALIASES)
ENTRY_POINT_GROUP = "veriscale.criteria"
_HEADING = re.compile(r"^(#{1,2})\s+(\S.*?)\s*#*\s*$")
_WHY = re.compile(r"^>\s*Why:\s*(.+?)\s*$")


@dataclass(frozen=True)
class Criterion:
    name: str
    description: str
    rationale: str = ""  # the "> Why:" line: for people, never in a prompt


@dataclass(frozen=True)
class Pack:
    """Where a criteria pack comes from: ``origin`` is built-in, the criteria_dir folder, or a plugin."""

    name: str
    origin: str
    read: Callable[[], str]


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
    rationales: dict[str, str] = {}
    for line in lines:
        m = _HEADING.match(line)
        if m and len(m.group(1)) == level:
            items.append((m.group(2).strip(), []))
        elif m and len(m.group(1)) < level:
            continue  # the title
        elif items:
            if not any(x.strip() for x in items[-1][1]) and (why := _WHY.match(line)):
                rationales[items[-1][0]] = why.group(1)
                continue
            items[-1][1].append(line)
        else:
            note_lines.append(line)
    crits = tuple(Criterion(n, "\n".join(body).strip(), rationales.get(n, "")) for n, body in items)
    seen: set[str] = set()
    for crit in crits:
        if crit.name.lower() in seen:
            raise UserError(f"criterion '{crit.name}' appears twice in '{name}': give each criterion one heading")
        seen.add(crit.name.lower())
    empty = [c.name for c in crits if not c.description]
    if empty:
        raise UserError(f"criterion '{empty[0]}' in '{name}' has no description: write what it checks under its heading")
    return CriteriaSet(name, "\n".join(note_lines).strip(), crits)


def available_packs() -> dict[str, Pack]:
    """Every pack by name: the built-in ones, then the ``criteria_dir`` folder's, then plugins'
    (a later one never hides an earlier name)."""
    packs: dict[str, Pack] = {}
    root = resources.files("veriscale.verify").joinpath("criteria")
    for name in PACKS:
        packs[name] = Pack(name, "built-in", lambda name=name: root.joinpath(f"{name}.md").read_text("utf-8"))
    folder = _criteria_dir()
    if folder is not None:
        for path in sorted(folder.glob("*.md")):
            if path.stem not in packs and path.stem not in ALIASES:
                packs[path.stem] = Pack(path.stem, f"criteria_dir {folder}",
                                        lambda path=path: read_text(path, "criteria file"))
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry.name not in packs and entry.name not in ALIASES:
            packs[entry.name] = Pack(entry.name, f"plugin {entry.value}", lambda entry=entry: _plugin_text(entry))
    return packs


def _criteria_dir() -> Path | None:
    from veriscale import settings

    folder = settings.value("criteria_dir")
    if folder is None:
        return None
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"{setting('criteria_dir', str(folder))} is not a folder: give a folder of NAME.md criteria "
                        "packs, or unset it")
    return folder


def _plugin_text(entry: metadata.EntryPoint) -> str:
    try:
        found = entry.load()
        text = found() if callable(found) else Path(str(found)).read_text("utf-8")
    except Exception as exc:  # noqa: BLE001 - a broken plugin is one sentence, never a traceback
        raise UserError(f"the criteria pack '{entry.name}' of plugin {entry.value} cannot be read ({exc}): fix or "
                        "uninstall the plugin") from None
    if not isinstance(text, str):
        raise UserError(f"the criteria pack '{entry.name}' of plugin {entry.value} is not Markdown text: the entry "
                        "point must name a .md path or a function returning its text")
    return text


def load_criteria(spec: str) -> CriteriaSet:
    """A pack by name (built-in, an alias such as ``agent``, the criteria_dir folder's, a plugin's)
    or a Markdown file path; anything else is one sentence listing the packs."""
    name = ALIASES.get(spec, spec)
    if spec == "auto" or spec.startswith("auto:"):  # generated per task: verify.criteria_auto, not a pack
        raise UserError(f"{setting('criteria', spec)} is generated from one task's text by score, compare, select "
                        "and bench; this use takes a pack or a .md file: pass one, or save generated ones "
                        f"with {setting('save_criteria')} and pass that file")
    if name in PACKS:  # the built-in ones without looking anywhere else
        text = resources.files("veriscale.verify").joinpath(f"criteria/{name}.md").read_text("utf-8")
        return parse_criteria(text, name)
    path = Path(spec)
    if path.suffix.lower() == ".md" or path.exists():
        if not path.exists():
            raise UserError(f"criteria file '{spec}' does not exist: fix the path, or give a pack name ("
                            f"{', '.join(sorted(available_packs()))})")
        return parse_criteria(read_text(path, "criteria file"), str(path))
    packs = available_packs()
    if name in packs:
        return parse_criteria(packs[name].read(), name)
    raise UserError(f"criteria '{spec}' is neither a pack ({', '.join(sorted(packs))}; 'veriscale criteria list' "
                    "says what each is for) nor an existing .md file: pass one of those")
