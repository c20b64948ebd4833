"""``veriscale harness evolve``: new or changed skills from scored runs whose grader gave feedback
(:mod:`veriscale.harness.evolve`).

    veriscale harness evolve runs/score.json --out skills/ --model http://127.0.0.1:8000/v1#qwen --answer-keys keys/
    veriscale harness evolve runs/ --out skills/ --model ... --evaluate --grader 'python3 grade.py' --no-jail
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from veriscale.cli.common import console, emit_json, err_console, user_errors
from veriscale.cli.flags import cli_text
from veriscale.shown_text import assembled, for_terminal


def add_evolve_command(sub_app: typer.Typer) -> None:
    """``veriscale harness evolve`` on ``sub_app`` (once)."""
    if any(getattr(c, "name", None) == "evolve" for c in sub_app.registered_commands):
        return

    @sub_app.command("evolve")
    def evolve_command(
        runs: Optional[List[Path]] = typer.Argument(
            None, help="Score results of harness runs (score.json, score-ID.json) or folders holding score.json; "
                       "the grader must have given \"feedback\"."),
        out: Path = typer.Option(..., "--out", help="Skills folder: each accepted skill as OUT/<skill>/SKILL.md, "
                                                    "every version under OUT/<skill>/versions/vN/ with origin.json."),
        model: str = typer.Option(..., "--model", help="Model URI of the session that proposes skills."),
        answer_keys: Optional[Path] = typer.Option(
            None, "--answer-keys", help="Folder of answer keys: a proposal holding any of their values is rejected."),
        archive_dir: Optional[Path] = typer.Option(
            None, "--archive-dir", help="Where <task>.scores.json lives (default: beside each task)."),
        skills: Optional[List[Path]] = typer.Option(
            None, "--skills", help="Your skills folders (repeatable): proposals may change their skills."),
        evaluate: bool = typer.Option(
            False, "--evaluate", help="Leave-one-out: evolve from the other tasks' failures, rerun each held-out task "
                                      "with those skills and grade it (needs --grader)."),
        grader: Optional[str] = typer.Option(None, "--grader", help="Grader command for --evaluate (as harness score)."),
        contract: str = typer.Option("artifact", "--contract", help="The reruns' contract for --evaluate: pick-only or artifact."),
        no_jail: bool = typer.Option(False, "--no-jail", help="Run --evaluate's sessions unconfined (every log line says so)."),
        as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    ) -> None:
        """Propose new or changed skills from graded failures; reject any that leaks a grader, archive or
        answer-key value; store the rest as versioned skills with their origin.

        Example: veriscale harness evolve runs/score.json --out skills/ --model http://127.0.0.1:8000/v1#qwen --answer-keys keys/
        """
        from veriscale.cli.settings import current
        from veriscale.engine.store import Store
        from veriscale.errors import UserError
        from veriscale.harness.evolve import evaluate as loo
        from veriscale.harness.evolve.evolve import evolve_skills, gather, propose, store_reviews, write_report
        from veriscale.harness.scoring.grader import GraderCommand
        from veriscale.models.uri import load_backend

        with user_errors():
            if evaluate and grader is None:
                raise UserError("--evaluate reruns the held-out tasks and grades them: give --grader CMD")
            settings = current()
            detect_on, mitigation = settings.injection_detect == "on", settings.injection_mitigation
            gathered = gather(runs or [], answer_keys=answer_keys, archive_dir=archive_dir)  # bad input: before a model loads
            command = GraderCommand.parse(grader) if evaluate and grader else None
            backend = load_backend(model)
            store = Store.open()
            report = evolve_skills(runs or [], out, backend, answer_keys=answer_keys, archive_dir=archive_dir,
                                   skills_dirs=skills, model_uri=model, mitigation=mitigation,
                                   detect_injections=detect_on, store=store, gathered=gathered)
            if evaluate:
                scored = gathered[0]

                def propose_fn(failures, fold_out):
                    reviews, injection = propose(failures, scored, fold_out, backend, skills_dirs=skills,
                                                 mitigation=mitigation, detect_injections=detect_on, store=store)
                    return store_reviews(reviews, failures, fold_out, runs=report.runs, model=model, injection=injection)

                rerun = loo.harness_rerun(model, command, run_id=loo.heldout_run_id(), contract=contract, no_jail=no_jail,
                                          archive_dir=archive_dir, backend=backend)
                report.evaluation = loo.leave_one_out(scored, out, propose_fn, rerun)
            written = write_report(report, out)
        if as_json:
            emit_json(report.to_dict(), "harness-evolve")
            return
        table = Table(title=for_terminal(f"proposals from {len(report.failures)} failure(s)"))
        for column in ("skill", "verdict", "addresses", "why / where"):
            table.add_column(column)
        for entry in report.accepted:
            table.add_row(for_terminal(entry["skill"]), f"accepted v{entry['version']}", for_terminal(", ".join(entry["addresses"])),
                          for_terminal(entry["path"]))
        for entry in report.rejected:
            table.add_row(for_terminal(entry["skill"]), "rejected", for_terminal(", ".join(entry["addresses"])),
                          for_terminal(entry["reason"]))
        if not report.accepted and not report.rejected:
            table.add_row("-", "no proposal", "-", "the session proposed nothing")
        console.print(table)
        if report.evaluation is not None:
            ev = report.evaluation
            for fold in ev["folds"]:
                after = "-" if fold["after"] is None else f"{fold['after']:.4f}"
                console.print(for_terminal(f"held out {fold['held_out']}: before {fold['before']:.4f}, after {after}"
                                           + (f" ({fold['skipped']})" if fold.get("skipped") else "")), highlight=False)
            console.print(for_terminal(f"held-out mean before {ev['before']}, after {ev['after']}: {ev['note']}"),
                          highlight=False)
        console.print(assembled(("report written to ", ""), str(written)), highlight=False)
        for note in report.notes:
            err_console.print(assembled(("note: ", "yellow"), cli_text(note)), highlight=False, soft_wrap=True)
