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
from rich.text import Text

from veriscale.cli import harness_jail
from veriscale.cli.common import console, emit_json, err_console, user_errors
from veriscale.cli.flags import cli_text
from veriscale.shown_text import assembled, for_terminal, for_terminal_lines

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
    from veriscale.harness.workspace.materialize import materialize
    from veriscale.harness.workspace.source_layout import DEFAULT_ANSWER_KEY_PATTERNS

    with user_errors():
        patterns = list(exclude_pattern or [])
        report = materialize(
            source, dest, seed=seed, task_file=task_file, archive_dir=archive_dir,
            exclude_patterns=patterns if no_default_excludes else list(DEFAULT_ANSWER_KEY_PATTERNS) + patterns,
        )
    if as_json:
        emit_json(report.to_dict(), "harness-materialize")
        return
    console.print(assembled(  # rollout names and paths are shown as text: never markup, never a terminal escape
        for_terminal(report.task_dir, "bold"),
        (f": {len(report.label_map)} rollouts, {len(report.views)} text views; scores and label map in ", ""),
        report.archive_file), highlight=False)
    if report.left_out:
        table = Table(title="left out of the task folder")
        table.add_column("path")
        table.add_column("reason")
        for path, reason in report.left_out:
            table.add_row(for_terminal(path), for_terminal(reason))
        console.print(table)
    for warning in report.warnings:
        err_console.print(assembled(("warning: ", "yellow"), cli_text(warning)), highlight=False)


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
    from veriscale.harness.claims.claim_map import build_agenda, build_claim_map
    from veriscale.harness.claims.report import write_claim_map

    with user_errors():
        claim_map = build_claim_map(task_dir, rel_tol=rel_tol)
        paths = write_claim_map(claim_map, out if out is not None else task_dir / "claims")
    agenda = build_agenda(claim_map)
    if as_json:
        emit_json({"claims": claim_map.to_dict(), "agenda": agenda, "files": {k: str(v) for k, v in paths.items()}}, "harness-claims")
        return
    counts = claim_map.counts()  # rollout text is shown as text: never markup, never a terminal escape
    console.print(Text.assemble(
        for_terminal(claim_map.task, "bold"),
        f": {len(claim_map.rollouts)} rollouts; {counts['consensus']} consensus, {counts['disputed']} disputed, "
        f"{counts['omitted']} omitted (files in ", for_terminal(paths["claims"].parent), ")"), highlight=False)
    if agenda["items"]:
        table = Table(title="disputed claims, most informative check first")
        for column in ("#", "claim", "candidates (support)", "gain bits", "related"):
            table.add_column(column)
        for item in agenda["items"][:top]:
            candidates = ", ".join(f"{c['display']} ({c['support']})" for c in item["candidates"])
            table.add_row(str(item["rank"]), for_terminal(item["key"]), for_terminal(candidates),
                          f"{item['gain_bits']:.3f}", str(item["related_claims"]))
        console.print(table)
    for warning in claim_map.warnings:
        err_console.print(Text.assemble(("warning: ", "yellow"), for_terminal(cli_text(warning))), highlight=False)


# --- skills and scoring ----------------------------------------------------------------------

skills_app = typer.Typer(
    name="skills",
    help="The skill library: evidence-*, resolve-*, falsify-*, repair-* method texts and scripts.\n\n"
    "Example: veriscale harness skills list --phase adjudication",
    no_args_is_help=True,
)
harness_app.add_typer(skills_app, name="skills")


@skills_app.command("list")
def skills_list_command(
    phase: Optional[str] = typer.Option(
        None, "--phase", help="Session: resolver, challenger, adjudication or delivery (default: every skill)."
    ),
    skills_dir: Optional[List[Path]] = typer.Option(
        None, "--skills-dir", help="Folder of your own <phase>-<name>/SKILL.md skills (repeatable; same name replaces)."
    ),
    file: Optional[List[str]] = typer.Option(
        None, "--file", help="Keep only skills whose applies-to matches this deliverable name (repeatable)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the skills as JSON."),
) -> None:
    """List skills, optionally those one session receives.

    Example: veriscale harness skills list --phase resolver --file model.xlsx
    """
    from veriscale.harness.skills.library import STAGES, all_skills, load_skills

    with user_errors():
        if phase is None:
            found = list(all_skills(skills_dir).values())
            if file is not None:
                found = [s for s in found if s.applies(file)]
            found.sort(key=lambda s: (STAGES.index(s.phase), s.name))
        else:
            found = load_skills(phase, dirs=skills_dir, files=file)
    if as_json:
        emit_json([
            {"name": s.name, "phase": s.phase, "description": s.description, "applies_to": list(s.applies_to),
             "path": str(s.path), "scripts": [str(p) for p in s.scripts]}
            for s in found
        ], "harness-skills")
        return
    table = Table(title=for_terminal(f"skills for {phase}" if phase else "skills"))
    for column in ("name", "applies to", "scripts", "description"):
        table.add_column(column)
    for s in found:
        table.add_row(for_terminal(s.name), for_terminal(" ".join(s.applies_to)),
                      for_terminal(", ".join(p.name for p in s.scripts)), for_terminal(s.description))
    console.print(table)


@skills_app.command("show")
def skills_show_command(
    name: str = typer.Argument(..., help="Skill name, e.g. evidence-xlsx."),
    skills_dir: Optional[List[Path]] = typer.Option(None, "--skills-dir", help="Extra skill folders (repeatable)."),
) -> None:
    """Print one skill's SKILL.md and its script paths.

    Example: veriscale harness skills show repair-workbook
    """
    from veriscale.data.reader import read_text
    from veriscale.errors import UserError
    from veriscale.harness.skills.library import all_skills

    with user_errors():
        skills = all_skills(skills_dir)
        if name not in skills:
            raise UserError(f"no skill named '{name}': run `veriscale harness skills list` to see the names")
        skill = skills[name]
        text = read_text(skill.path, "skill file")  # a skills folder is the user's: a FIFO there must not hang
    console.print(for_terminal_lines(text), highlight=False)
    for script in skill.scripts:
        console.print(assembled(("script: ", ""), str(script)), highlight=False)


def _fmt(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.4f}"


@harness_app.command("score")
def score_command(
    task_dirs: List[Path] = typer.Argument(..., help="Materialised task folder(s)."),
    grader: Optional[str] = typer.Option(
        None, "--grader", help="Grader command, run on the host as CMD --task T --deliverables D; prints {\"score\": x}."
    ),
    run: Optional[Path] = typer.Option(None, "--run", help="Run folder of the one task (finish.json + deliverables/ inside)."),
    runs: Optional[Path] = typer.Option(None, "--runs", help="Runs root: the run of task T is RUNS/T (or RUNS/T/RUN_ID with --run-id)."),
    run_id: Optional[str] = typer.Option(None, "--run-id", help="Score run RUN_ID of every task: <task>.runs/RUN_ID (or RUNS/<task>/RUN_ID)."),
    delivered: Optional[Path] = typer.Option(None, "--delivered", help="Delivered files of the one task (with --base)."),
    base: Optional[str] = typer.Option(None, "--base", help="Base rollout the delivery revised (rNN), or 'none' (with --delivered)."),
    select_only: bool = typer.Option(False, "--select-only", help="Use the archived score of the chosen base; no grader call."),
    archive_dir: Optional[Path] = typer.Option(None, "--archive-dir", help="Where <task>.scores.json lives (default: beside each task)."),
    tolerance: float = typer.Option(0.05, "--tolerance", help="Warn when a re-graded base differs from its archived score by more."),
    bootstrap: int = typer.Option(2000, "--bootstrap", help="Bootstrap resamples for the 95% intervals."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed."),
    grader_timeout: float = typer.Option(600.0, "--grader-timeout", help="Seconds one grader call may take."),
    out: Optional[Path] = typer.Option(
        None, "--out", help="JSON results file (default: score.json in --run/--runs, or score-<run-id>.json beside the tasks)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
) -> None:
    """Score deliveries: final = select + (revised - base_regraded), or --select-only from the archive.

    Example: veriscale harness score tasks/finance --run runs/finance --grader 'python3 grade.py'
    """
    from veriscale.errors import UserError
    from veriscale.harness.protocol.layout import run_dir_for
    from veriscale.harness.scoring.score import (
        GraderCommand, ScoreItem, explicit_delivery, read_run, score_deliveries, write_report,
    )

    with user_errors():
        given = [name for name, value in (("--run", run), ("--runs or --run-id", runs or run_id), ("--delivered", delivered))
                 if value is not None]
        if len(given) != 1:
            raise UserError("say where the delivery is with exactly one of --run DIR, --runs DIR / --run-id ID, "
                            "or --delivered DIR --base rNN")
        if (run is not None or delivered is not None) and len(task_dirs) != 1:
            raise UserError(f"{given[0]} scores one task but {len(task_dirs)} task folders were given: use --run-id or --runs for several")
        if delivered is not None and base is None:
            raise UserError("--delivered needs --base: the rollout label the delivery revised (e.g. r03) or 'none'")
        if base is not None and delivered is None:
            raise UserError("--base goes with --delivered; a run folder's finish.json already names its base")
        if delivered is not None:
            items = [ScoreItem(task_dirs[0], explicit_delivery(delivered, base or "none"))]
            default_out = delivered.parent
        elif run is not None:
            items = [ScoreItem(task_dirs[0], read_run(run))]
            default_out = run
        else:
            items = []
            for task in task_dirs:
                folder = run_dir_for(task, run_id, runs)
                try:
                    items.append(ScoreItem(task, read_run(folder)))
                except UserError as exc:  # one task without a usable delivery is reported, not fatal
                    items.append(ScoreItem(task, None, problem=str(exc)))
            default_out = runs if runs is not None else task_dirs[0].parent
        command = None
        if not select_only:
            if grader is None:
                raise UserError("re-grade scoring needs --grader CMD (or pass --select-only to use archived scores)")
            command = GraderCommand.parse(grader, timeout_s=grader_timeout)
        report = score_deliveries(items, grader=command, select_only=select_only, archive_dir=archive_dir,
                                  tolerance=tolerance, n_resamples=bootstrap, seed=seed)
        if out is None:
            stem = f"score-{run_id}" if run_id and run is None and delivered is None else "score"
            out = default_out / (f"{stem}-select-only.json" if select_only else f"{stem}.json")
        written = write_report(report, out)
    if as_json:
        payload = report.to_dict()
        payload["file"] = str(written)
        emit_json(payload, "harness-score")
    else:
        if report.preflight:
            console.print(for_terminal_lines(cli_text(report.preflight)), highlight=False)
        table = Table(title=f"per task ({report.mode})")
        for column in ("task", "base", "select", "revised", "base regraded", "final", "single rollout", "drift"):
            table.add_column(column)
        for t in report.tasks:
            table.add_row(for_terminal(t.task), for_terminal(t.base or "none"), _fmt(t.select), _fmt(t.revised), _fmt(t.base_regraded),
                          _fmt(t.final) if t.error is None else "failed", _fmt(t.single_rollout), _fmt(t.drift))
        console.print(table)
        summary = Table(title=f"mean over tasks, {int(report.confidence * 100)}% bootstrap interval (seed {report.seed})")
        for column in ("method", "mean", "interval", "n"):
            summary.add_column(column)
        for name, est in [*report.methods.items(), *report.comparisons.items()]:
            if est is None:
                summary.add_row(for_terminal(name), "-", "-", "0")
            else:
                summary.add_row(for_terminal(name), f"{est.mean:+.4f}" if " - " in name else f"{est.mean:.4f}",
                                for_terminal(f"[{est.low:.4f}, {est.high:.4f}]"), str(est.n))
        console.print(summary)
        console.print(assembled(("results written to ", ""), str(written)), highlight=False)
    for warning in report.warnings:
        err_console.print(assembled(("warning: ", "yellow"), cli_text(warning)), highlight=False, soft_wrap=True)
    if report.failures:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the ``harness`` sub-app to the main ``veriscale`` app."""
    from veriscale.cli.harness_evolve import add_evolve_command
    from veriscale.cli.harness_run import add_run_command

    add_run_command(harness_app)
    add_evolve_command(harness_app)
    if not any(getattr(c, "name", None) == "jail-run" for c in harness_app.registered_commands):
        harness_jail.register(harness_app)
    app.add_typer(harness_app, name="harness")
