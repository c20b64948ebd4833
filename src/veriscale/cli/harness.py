"""``veriscale harness ...``: build task workspaces and claim maps for the agentic harness.

    veriscale harness materialize exports/finance tasks/finance --seed 7
    veriscale harness claims tasks/finance            # writes tasks/finance/claims/*.json, prints a table
    veriscale harness claims tasks/finance --json     # the claim map and agenda as JSON
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from veriscale.cli.common import console, emit_json, err_console, user_errors

harness_app = typer.Typer(
    name="harness",
    help="Agentic verification harness: task workspaces and claim maps.\n\n"
    "Example: veriscale harness materialize exports/finance tasks/finance && "
    "veriscale harness claims tasks/finance",
    no_args_is_help=True,
)


@harness_app.command("materialize")
def materialize_command(
    source: Path = typer.Argument(..., help="Folder with task.md, inputs/ and rollouts/<run>/ (answer keys are left out)."),
    dest: Path = typer.Argument(..., help="New task folder to create (must not exist or be empty)."),
    exclude_pattern: Optional[List[str]] = typer.Option(
        None, "--exclude-pattern", "-x", help="Extra answer-key name pattern to leave out (repeatable), e.g. 'key_*'."
    ),
    no_default_excludes: bool = typer.Option(
        False, "--no-default-excludes", help="Use only the --exclude-pattern patterns, not the built-in answer-key list."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the shuffle that assigns r01, r02, ... to rollouts."),
    task_file: Optional[Path] = typer.Option(None, "--task-file", help="Task description, if not SOURCE/task.md."),
    archive_dir: Optional[Path] = typer.Option(
        None, "--archive-dir", help="Where <task>.scores.json goes (default: beside DEST, outside the task)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Build a task folder (spec/, workspace/, rollouts/rNN/) with text views, leaving answer keys out.

    Example: veriscale harness materialize exports/finance tasks/finance --seed 7 -x 'key_*'
    """
    from veriscale.harness.materialize import DEFAULT_ANSWER_KEY_PATTERNS, materialize

    with user_errors():
        patterns = list(exclude_pattern or [])
        report = materialize(
            source, dest, seed=seed, task_file=task_file, archive_dir=archive_dir,
            exclude_patterns=patterns if no_default_excludes else list(DEFAULT_ANSWER_KEY_PATTERNS) + patterns,
        )
    if as_json:
        emit_json(report.to_dict())
        return
    console.print(
        f"[bold]{report.task_dir}[/]: {len(report.label_map)} rollouts, {len(report.views)} text views; "
        f"scores and label map in {report.archive_file}"
    )
    if report.left_out:
        table = Table(title="left out of the task folder")
        table.add_column("path")
        table.add_column("reason")
        for path, reason in report.left_out:
            table.add_row(path, reason)
        console.print(table)
    for warning in report.warnings:
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False)


@harness_app.command("claims")
def claims_command(
    task_dir: Path = typer.Argument(..., help="A materialised task folder."),
    out: Optional[Path] = typer.Option(None, "--out", help="Where claims.json, agenda.json, claims.md go (default TASK_DIR/claims)."),
    rel_tol: float = typer.Option(1e-6, "--rel-tol", help="Relative tolerance for numbers to count as equal."),
    top: int = typer.Option(10, "--top", help="Disputed claims to show in the table."),
    as_json: bool = typer.Option(False, "--json", help="Print the claim map and agenda as JSON."),
) -> None:
    """Align claims across rollouts: consensus, disputed, omitted; rank disputed checks by information gain.

    Example: veriscale harness claims tasks/finance --rel-tol 1e-4
    """
    from veriscale.harness.claims import build_agenda, build_claim_map, write_claim_map

    with user_errors():
        claim_map = build_claim_map(task_dir, rel_tol=rel_tol)
        paths = write_claim_map(claim_map, out if out is not None else task_dir / "claims")
    agenda = build_agenda(claim_map)
    if as_json:
        emit_json({"claims": claim_map.to_dict(), "agenda": agenda, "files": {k: str(v) for k, v in paths.items()}})
        return
    counts = claim_map.counts()
    console.print(
        f"[bold]{claim_map.task}[/]: {len(claim_map.rollouts)} rollouts; "
        f"{counts['consensus']} consensus, {counts['disputed']} disputed, {counts['omitted']} omitted "
        f"(files in {paths['claims'].parent})"
    )
    if agenda["items"]:
        table = Table(title="disputed claims, most informative check first")
        for column in ("#", "claim", "candidates (support)", "gain bits", "related"):
            table.add_column(column)
        for item in agenda["items"][:top]:
            candidates = ", ".join(f"{c['display']} ({c['support']})" for c in item["candidates"])
            table.add_row(str(item["rank"]), item["key"], candidates, f"{item['gain_bits']:.3f}", str(item["related_claims"]))
        console.print(table)
    for warning in claim_map.warnings:
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add the ``harness`` sub-app to the main ``veriscale`` app."""
    app.add_typer(harness_app, name="harness")
