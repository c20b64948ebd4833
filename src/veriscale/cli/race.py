"""``veriscale race``: run an agent N times in isolated git worktrees, pick the best run, apply it.

    veriscale race -n 3 --task task.md -- sh -c 'my-agent --task "$VERISCALE_RACE_TASK"'
    veriscale race -n 5 --task task.md --trajectory traj.jsonl --apply -- ./agent.sh
    veriscale race -n 3 --task task.md --json -- python agent.py > race.json

Each run gets a detached worktree of HEAD (in a temp folder outside the repo) as its cwd and
``VERISCALE_RACE_INDEX`` (0..N-1), ``VERISCALE_RACE_N`` and ``VERISCALE_RACE_TASK`` in its
environment. Its diff (new files included) and transcript become candidate ``run-<i>``; the
selection is ``veriscale select``'s. The winner's diff is applied to your working tree only on
confirmation (``--apply`` skips the prompt), and never over your uncommitted changes.
Exit codes: 0 done (applied or not), 2 bad input, 3 every run failed or a model call failed,
4 the winner's diff was not applied because it conflicts with your working tree, 130 Ctrl-C.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.table import Table

from veriscale.cli import options as o
from veriscale.cli.common import console, emit_json, err_console, fail, note, positive_seconds, user_errors
from veriscale.cli.select import (
    DEFAULT_MIN_CONFIDENCE, AdaptiveOpt, BudgetOpt, MethodOpt, PivotsOpt, SelectCriteriaOpt, SelectRepeatsOpt,
    SelectSeedOpt,
)
from veriscale.engine.run_log import RunLog
from veriscale.engine.run_scope import RunHandle, recorded_run
from veriscale.errors import UserError
from veriscale.race.apply import apply_patch, refusal, uncommitted_paths
from veriscale.race.run_candidates import to_candidates
from veriscale.race.agent_runs import RunResult, run_race
from veriscale.race.worktrees import Repo, find_repo, git
from veriscale.selection.inputs import task_from_file
from veriscale.selection.settings import SelectionSettings
from veriscale.verify.criteria import load_criteria
from veriscale.shown_text import assembled, for_terminal, for_terminal_lines

if TYPE_CHECKING:  # the selection machinery (numpy) is imported when a race picks
    from veriscale.selection.select import Selection

ALL_FAILED_EXIT = 3
NOT_APPLIED_EXIT = 4
INTERRUPTED_EXIT = 130
DEFAULT_TIMEOUT_S = 1800.0
STDERR_LINES_SHOWN = 5
TAIL_LINES_KEPT = 20

CommandArg = Annotated[Optional[list[str]], typer.Argument(
    help="The agent command, after --; it runs once per worktree, with that worktree as its cwd.", show_default=False)]
RunsOpt = Annotated[int, typer.Option("--runs", "-n", help="How many runs race at once, each in its own worktree.")]
RaceTaskOpt = Annotated[Path, typer.Option(
    "--task", "-t", help="Task file (text, Markdown, JSON): what the runs are judged against; its path is "
    "$VERISCALE_RACE_TASK in each run.", show_default=False)]
TrajectoryOpt = Annotated[Optional[str], typer.Option(
    "--trajectory", help="Where (relative to its worktree) each run writes its trajectory in a format veriscale "
    "reads; else its stdout/stderr are judged. The file is left out of the diff.")]
TimeoutOpt = Annotated[float, typer.Option("--timeout", help="Seconds a run may take; past it its process group is killed and the run flagged.")]
ApplyOpt = Annotated[bool, typer.Option("--apply", help="Apply the winner's diff to your working tree without asking.")]
SaveDiffOpt = Annotated[Optional[Path], typer.Option("--save-diff", help="Also write the winner's diff to this file (for git apply).")]


def register(app: typer.Typer) -> None:
    @app.command("race", context_settings={"allow_interspersed_args": False})
    def race_command(
        command: CommandArg = None,
        task: RaceTaskOpt = ..., runs: RunsOpt = 3, trajectory: TrajectoryOpt = None,
        timeout: TimeoutOpt = DEFAULT_TIMEOUT_S, apply: ApplyOpt = False, save_diff: SaveDiffOpt = None,
        method: MethodOpt = "ppt", pivots: PivotsOpt = 2, budget_tokens: BudgetOpt = None, adaptive: AdaptiveOpt = True,
        model: o.ModelOpt = None, store: o.StoreOpt = None, scale: o.ScaleOpt = "letters",
        criteria: SelectCriteriaOpt = None, criterion: o.OnlyOpt = None, repeats: SelectRepeatsOpt = None,
        reasoning: o.ReasoningOpt = False, discrete: o.DiscreteOpt = False, seed: SelectSeedOpt = 0,
        refresh: o.RefreshOpt = False, json_out: o.JsonOpt = False,
        max_calls: o.MaxCallsOpt = None, concurrency: o.ConcurrencyOpt = None,
    ) -> None:
        """Run an agent N times in isolated git worktrees, pick the best run, apply its diff.

        The worktrees start from HEAD: your uncommitted changes are not in them, and are never
        touched. The winner's diff is applied on confirmation (--apply: without asking), and
        refused where it would touch a file you have uncommitted changes in.

        Example: veriscale race -n 3 --task task.md -- sh -c 'my-agent "$VERISCALE_RACE_TASK"'
        """
        with user_errors():
            if runs < 1:
                raise UserError(f"-n {runs} runs is too few: race at least 1 run, e.g. -n 3")
            if not command:
                raise UserError("no agent command given: put it after --, e.g. veriscale race -n 3 --task task.md -- sh -c './agent'")
            positive_seconds(timeout, "--timeout", "1800")  # the seconds a run may take; NaN or inf never end it
            if trajectory is not None:
                _check_relative(trajectory)
            if str(task) == "-" or task.is_dir():
                raise UserError(f"--task '{task}' is not a file: give the task as a text, Markdown or JSON file")
            task_obj = task_from_file(str(task))
            repo = find_repo(Path.cwd())
            crits = load_criteria(criteria or "agent")
            if criterion:
                crits = crits.only(criterion)
            cs = o.command_settings(model, store, concurrency)
            settings = SelectionSettings(
                method=method, k=pivots, repeats=repeats, adaptive=adaptive, min_confidence=DEFAULT_MIN_CONFIDENCE,
                budget_tokens=budget_tokens, seed=seed, scale=scale, criteria=crits, reasoning=reasoning,
                discrete=discrete, injection_policy=cs.injection_policy, **cs.injection())  # as select's
            verifier = settings.verifier(o.open_model(cs), store=o.open_store(cs), refresh=refresh,
                                         max_calls=max_calls, concurrency=cs.concurrency)
            try:
                with recorded_run(verifier.executor.store, "race", verifier.model.uri, {
                        "command": command, "n": runs, "task": str(task), "trajectory": trajectory, "timeout_s": timeout,
                        "base": repo.head, "method": method, "k": pivots, "criteria": crits.name, "seed": seed,
                        "apply": apply}) as run:  # every call (cache hits too) is linked to this run
                    code = _race(repo, command, runs, task, trajectory, timeout, apply, save_diff, json_out,
                                 task_obj, settings, verifier, run, run.partial)  # an early end keeps what is known
            except KeyboardInterrupt:
                fail("interrupted: every agent was stopped and every worktree removed; nothing was applied",
                     INTERRUPTED_EXIT)
            if code:
                raise typer.Exit(code)


def _race(repo: Repo, command: list[str], n: int, task: Path, trajectory: str | None, timeout: float,
          apply: bool, save_diff: Path | None, json_out: bool, task_obj, settings: SelectionSettings,
          verifier, run: RunHandle, outcome: dict[str, Any]) -> int:
    """The race, the selection, the apply; returns the exit code (the store run is finished here)."""
    if uncommitted_paths(repo.root):
        note(f"the worktrees start from HEAD ({repo.head[:12]}): your uncommitted changes are not in them, "
             "and stay untouched")
    with o.call_progress(n, "runs finished", not json_out, what="race", unit="runs finished") as advance:
        results = run_race(repo, command, n, timeout_s=timeout, task_file=task, trajectory=trajectory,
                           on_finished=lambda run: advance())
    outcome["runs"] = [_run_dict(r) for r in results]
    outcome["base"] = repo.head

    if all(r.failed for r in results):
        return _all_failed(results, run, outcome, json_out)
    if all(r.diff.empty for r in results):
        outcome["apply"] = {"status": "nothing", "message": "no run changed any file: nothing to apply"}
        run.finish("ok", outcome)
        _report(None, results, json_out, {**outcome, "run_id": run.id})
        note(outcome["apply"]["message"])
        return 0

    from veriscale.selection.select import plan_selection, run_selection

    candidates, notes = to_candidates(results, trajectory)
    RunLog(run.store).record_candidates(run.id, candidates)  # for the dashboard's trajectory viewer
    plan = plan_selection(task_obj, candidates, verifier=verifier, settings=settings)
    with o.call_progress(plan.judgements_planned * plan.calls_per_judgement, "selecting", not json_out,
                         what="race selection") as step:
        sel = run_selection(plan, verifier=verifier, on_progress=lambda done, planned: step())
    winner = results[sel.index]
    payload = {**sel.to_dict(), **outcome, "winner": winner.id}
    if not json_out:
        _report(sel, results, json_out, payload)
    for text in [*notes, *sel.notes]:
        note(text)
    if save_diff is not None and not winner.diff.empty:
        _save(save_diff, winner)
    status, message, code = _decide_apply(repo, winner, apply, run.id)
    payload["apply"] = {"status": status, "message": message}
    run.finish("ok", payload)
    if json_out:
        emit_json({**payload, "run_id": run.id}, "race")
    if status == "applied" and not json_out:
        console.print(for_terminal(message), highlight=False, soft_wrap=True)
    elif code:
        err_console.print(assembled(("error: ", "bold red"), message), highlight=False, soft_wrap=True)
    else:
        note(message)
    return code


def _decide_apply(repo: Repo, winner: RunResult, apply: bool, run_id: int) -> tuple[str, str, int]:
    """(status, message, exit code) of applying the winner's diff, asking first unless ``apply``."""
    if winner.diff.empty:
        return "nothing", f"the winner {winner.id} changed no file: nothing to apply", 0
    can_ask = can_confirm()
    why_not = refusal(repo.root, winner.diff, who=winner.id)
    if why_not is not None:
        kept = f" (the diff is kept in store run {run_id}: veriscale runs show {run_id})"
        return "refused", why_not + kept, NOT_APPLIED_EXIT if (apply or can_ask) else 0
    if not apply:
        if not can_ask:
            return "not_asked", (f"not applied: there is no terminal to confirm on; rerun with --apply to apply the "
                                 f"winner's diff without asking (it is kept in store run {run_id}: veriscale runs show "
                                 f"{run_id}, or pass --save-diff FILE)"), 0
        if not typer.confirm(f"apply {winner.id}'s diff ({winner.diff.stats}) to your working tree?",
                             default=False, err=True):
            return "declined", f"not applied; the diff is kept in store run {run_id} (veriscale runs show {run_id})", 0
    head = git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], repo.root, check=False).stdout.strip()
    apply_patch(repo.root, winner.diff)
    moved = "" if head == repo.head else f" (note: HEAD moved since the race began at {repo.head[:12]})"
    return "applied", f"applied {winner.id}'s diff ({winner.diff.stats}) to your working tree{moved}", 0


def can_confirm() -> bool:
    """True when there is a terminal to ask on (stdin is a TTY)."""
    return sys.stdin.isatty()


def _all_failed(results: list[RunResult], run: RunHandle, outcome: dict[str, Any], json_out: bool) -> int:
    message = f"every run failed ({', '.join(f'{r.id}: {r.status}' for r in results)}): nothing was selected or applied"
    run.finish("failed", {"error": message, **outcome})
    if json_out:
        emit_json({"error": message, **outcome, "run_id": run.id}, "race")
    else:
        table = Table(title=f"race · {len(results)} runs · every run failed")
        for name, justify in (("run", "left"), ("status", "left"), ("time", "right"), ("last stderr lines", "left")):
            table.add_column(name, justify=justify)
        for r in results:
            table.add_row(for_terminal(r.id), for_terminal(r.status), f"{r.wall_s:.1f}s",  # an agent's stderr: shown as text
                          for_terminal_lines("\n".join(r.last_lines("stderr", STDERR_LINES_SHOWN))))
        err_console.print(table)
    err_console.print(assembled(("error: ", "bold red"), message), highlight=False, soft_wrap=True)
    return ALL_FAILED_EXIT


def _report(sel: Selection | None, results: list[RunResult], json_out: bool, payload: dict[str, Any]) -> None:
    """The ranking (or, with no selection, the runs) as a table, then the reason and the pick."""
    if json_out:
        emit_json(payload, "race")
        return
    order = list(sel.ranking) if sel else list(range(len(results)))
    conf = "" if sel is None else f" · {sel.method} · confidence {'n/a' if sel.confidence is None else f'{sel.confidence:.2f}'}"
    table = Table(title=f"race · {len(results)} runs{conf}")
    table.add_column("#", justify="right")
    table.add_column("run", no_wrap=True)
    if sel:
        table.add_column("win mass", justify="right")
    for name in ("status", "time", "changes"):
        table.add_column(name, justify="right" if name == "time" else "left")
    for rank, i in enumerate(order):
        r = results[i]
        row = [str(rank + 1), for_terminal(r.id, "bold" if sel and i == sel.index else "")]
        if sel:
            row.append(f"{sel.scores[i]:.3f}")
        status = for_terminal(r.status, "red" if r.failed else "")
        row += [status, f"{r.wall_s:.1f}s", for_terminal(r.diff.stats)]
        table.add_row(*row)
    console.print(table)
    if sel is None:
        return
    console.print(assembled(("reason: ", "bold"), sel.reason.text), highlight=False, soft_wrap=True)
    u = sel.usage
    console.print(f"{sel.n_comparisons} comparisons, {u.model_calls} model calls, {u.cache_hits} cache hits",
                  style="dim", highlight=False)
    flag = " (it failed: check it before applying)" if results[sel.index].failed else ""
    console.print(assembled(("picked: ", ""), for_terminal(sel.best.id, "bold"), (flag, "")), highlight=False, soft_wrap=True)


def _run_dict(r: RunResult) -> dict[str, Any]:
    return {"id": r.id, "index": r.index, "exit_code": r.exit_code, "timed_out": r.timed_out, "failed": r.failed,
            "wall_s": r.wall_s, "diff_stats": r.diff.stats.to_dict(), "paths": list(r.diff.paths),
            "diff": _printable(r.diff.patch),
            "stdout_tail": "\n".join(r.stdout_tail.rstrip().splitlines()[-TAIL_LINES_KEPT:]),
            "stderr_tail": "\n".join(r.stderr_tail.rstrip().splitlines()[-TAIL_LINES_KEPT:]),
            "command": shlex.join(r.command)}


def _printable(text: str) -> str:
    """``text`` with undecodable bytes (kept by surrogateescape) shown as U+FFFD, for JSON."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _save(path: Path, winner: RunResult) -> None:
    try:
        path.write_bytes(winner.diff.patch.encode("utf-8", "surrogateescape"))
    except OSError as exc:
        raise UserError(f"cannot write the diff to '{path}' ({exc.strerror}): pass a writable --save-diff") from None
    note(f"saved {winner.id}'s diff to {path} (apply it with: git apply --binary {shlex.quote(str(path))})")


def _check_relative(rel: str) -> None:
    parts = Path(rel).parts
    if not rel.strip() or Path(rel).is_absolute() or ".." in parts:
        raise UserError(f"--trajectory '{rel}' is not a path inside the worktree: give it relative to the repo "
                        "root, e.g. --trajectory trajectory.jsonl")
