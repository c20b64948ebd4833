"""``veriscale criteria list|show``: the criteria packs a ``--criteria NAME`` can name.

    veriscale criteria list                 # every pack: built-in, your criteria_dir folder's, plugins'
    veriscale criteria show medical --json  # its criteria, each with its one-line rationale
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from veriscale.cli import options as o
from veriscale.cli.common import console, emit_json, user_errors
from veriscale.shown_text import for_terminal

criteria_app = typer.Typer(help="List and show the criteria packs (--criteria NAME).", no_args_is_help=True)


@criteria_app.command("list")
def list_packs(json_out: o.JsonOpt = False) -> None:
    """Every pack with where it comes from and its criteria."""
    from veriscale.errors import UserError
    from veriscale.verify.criteria import ALIASES, available_packs, parse_criteria

    with user_errors():
        rows = []
        for name, pack in available_packs().items():
            row: dict = {"name": name, "origin": pack.origin,
                         "aliases": sorted(a for a, n in ALIASES.items() if n == name), "title": "", "criteria": []}
            try:  # one unreadable pack of a user's folder is named, not the end of the list
                text = pack.read()
                row.update(title=_title(text), criteria=[c.name for c in parse_criteria(text, name).items])
            except UserError as exc:
                row["error"] = str(exc)
            rows.append(row)
    if json_out:
        emit_json({"packs": rows}, "criteria-list")
        return
    table = Table(title="criteria packs (--criteria NAME)")
    for column in ("pack", "for", "criteria", "from"):
        table.add_column(column)
    for row in rows:
        name = row["name"] + (f" ({', '.join(row['aliases'])})" if row["aliases"] else "")
        criteria = ", ".join(row["criteria"]) if "error" not in row else f"unreadable: {row['error']}"
        table.add_row(*(for_terminal(cell) for cell in (name, row["title"], criteria, row["origin"])))
    console.print(table)


@criteria_app.command("show")
def show_pack(name: Annotated[str, typer.Argument(help="A pack name (criteria list) or a criteria .md file.")],
              json_out: o.JsonOpt = False) -> None:
    """A pack's criteria, each with its description and its one-line rationale."""
    from veriscale.verify.criteria import load_criteria

    with user_errors():
        crits = load_criteria(name)
    doc = {"name": crits.name, "note": crits.note,
           "criteria": [{"name": c.name, "rationale": c.rationale, "description": c.description} for c in crits.items]}
    if json_out:
        emit_json(doc, "criteria-show")
        return
    console.print(for_terminal(f"{crits.name}: {len(crits.items)} criteria"), style="bold", highlight=False)
    if crits.note:
        console.print(_lines(crits.note), highlight=False, soft_wrap=True)
    for c in crits.items:
        console.print(Text("\n") + for_terminal(f"## {c.name}"), style="bold", highlight=False)
        if c.rationale:
            console.print(for_terminal(f"why: {c.rationale}"), style="italic", highlight=False, soft_wrap=True)
        console.print(_lines(c.description), highlight=False, soft_wrap=True)


def _lines(text: str) -> Text:
    """Multi-line text made safe for the terminal line by line (its line breaks kept)."""
    return Text("\n").join(for_terminal(line) for line in text.splitlines())


def _title(text: str) -> str:
    """The pack's ``#`` title line, if it has one."""
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return ""


def register(app: typer.Typer) -> None:
    app.add_typer(criteria_app, name="criteria")
