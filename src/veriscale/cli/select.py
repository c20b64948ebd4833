"""``veriscale select``: pick the best of N runs of one task (Best-of-N with PPT by default).

    veriscale select examples/terminal_bench/merge-diff-arc-agi-task.jsonl
    veriscale select task.md a.md b.md c.md --criteria general --json
    veriscale select runs/ --task task.md -k 1 --min-confidence 0.8

Where the task comes from, in order: ``--task FILE``; else the first path, when more paths
follow and it holds one plain answer with no task of its own (the ``TASK CANDIDATES...`` form);
else the task the runs carry (Harbor/ATIF trials, SWE-agent trajectories, Inspect logs...).
Exit codes: 0 picked, 2 bad input, 3 a model call failed (rerun resumes), 4 ``--min-confidence``
was given and the pick's confidence is below it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated, Optional, Sequence

import typer
from rich.table import Table

from veriscale.models.vision_probe import require_seen
from veriscale.selection.inputs import shows_images
from veriscale.cli import options as o
from veriscale.cli.common import console, emit_json, fail, note, prompt_tokens_text, user_errors
from veriscale.engine.run_log import RunLog
from veriscale.engine.run_scope import recorded_run
from veriscale.errors import UserError, setting
from veriscale.selection.inputs import default_criteria, resolve_inputs, task_taken_from
from veriscale.selection.settings import METHODS, SelectionSettings
from veriscale.cli.criteria_auto import chosen_for, runs_task, task_references
from veriscale.shown_text import assembled, for_terminal

if TYPE_CHECKING:  # the selection machinery (numpy) is imported when a command runs
    from veriscale.selection.select import Selection, SelectionPlan

UNDECIDED_EXIT = 4

PathsArg = Annotated[list[str], typer.Argument(
    help="[TASK] then candidates: files, folders or a JSONL pool. TASK is optional when the runs carry "
         "their task or --task is given.", show_default=False)]
TaskOpt = Annotated[Optional[str], typer.Option("--task", "-t", help="Task file (text, Markdown, JSON); overrides the runs' own task.")]
MethodOpt = Annotated[str, typer.Option("--method", help=f"Selection method: {', '.join(METHODS)}.")]
PivotsOpt = Annotated[int, typer.Option("--pivots", "-k", help="PPT pivots k (comparisons: N + k(N-k) + k(k-1)/2).")]
BudgetOpt = Annotated[Optional[int], typer.Option("--budget-tokens", help="Render budget per candidate in tokens (default: fits the model's context, capped for speed).")]
DecisionBudgetOpt = Annotated[Optional[str], typer.Option("--budget", help="What this decision may spend: calls=N or tokens=N (prompt tokens). The cost controller plans PPT's pivots, repeats and criteria inside it; cache hits do not count against it; --max-calls still refuses. Also $VERISCALE_BUDGET, \\[budget] per_decision.")]
MinConfOpt = Annotated[Optional[float], typer.Option("--min-confidence", help="Adaptive target; exit 4 when the pick's confidence stays below it.")]
AdaptiveOpt = Annotated[bool, typer.Option("--adaptive/--no-adaptive", help="Stop early once the leader is decided (PPT, round robin).")]
SelectRepeatsOpt = Annotated[Optional[int], typer.Option("--repeats", help="Judgements per comparison (default: 1 for PPT, 2 otherwise).")]
SelectCriteriaOpt = Annotated[Optional[str], typer.Option("--criteria", "-c", help="Built-in set (general, agent), a Markdown file, or auto (auto:N: N criteria the model writes from the task's text); default: agent for trajectories, general for answers.")]
SelectSeedOpt = Annotated[int, typer.Option("--seed", help="Seed of the PPT ring and knockout bracket, and of sampled reasoning.")]
FormatOpt = Annotated[Optional[str], typer.Option("--format", help="Candidate file format, when auto-detection is not wanted.")]

DEFAULT_MIN_CONFIDENCE = SelectionSettings.min_confidence  # race's fixed target, select's default
ID_WIDTH = 20  # what the candidate column gets beside three criteria in an 80-column terminal
ID_SEPARATORS = "_-./:@# "
MIN_PREFIX_SHOWN_AS_ELLIPSIS = 4
MIN_TAIL_SHOWN = 6


def _print_plan(plan: SelectionPlan, as_json: bool, task_file: str | None) -> None:
    if as_json:
        emit_json({"dry_run": True, **plan.to_dict(), **({"task_taken_from": task_file} if task_file else {})}, "select.dry-run")
        return
    bound = "" if plan.model_calls_upper_bound == plan.model_calls_planned else (
        f" (at most {plan.model_calls_upper_bound} with adaptive extra repeats)")
    console.print(
        f"{plan.method}: {plan.n_candidates} candidates ({plan.n_distinct} distinct), "
        f"{plan.comparisons_planned} comparisons, {plan.model_calls_planned} model calls{bound}; "
        f"at most {plan.prompt_tokens_upper_bound} prompt tokens before cache and prefix reuse; "
        f"render budget {plan.budget_tokens} tokens per candidate", highlight=False)
    for text in plan.notes:
        note(text)


def short_ids(ids: Sequence[str], width: int = ID_WIDTH) -> tuple[list[str], str]:
    """The ids as the table shows them, and the shared prefix shown as "…" ("" when none was).

        short_ids(["merge-diff-arc-agi-task__djqxa8x", "merge-diff-arc-agi-task__ydHFjQj"])
        # (['…djqxa8x', '…ydHFjQj'], 'merge-diff-arc-agi-task__')

    Ids that fit ``width`` stay whole. Otherwise their shared prefix becomes "…" (cut back to a
    separator, so each id keeps at least ``MIN_TAIL_SHOWN`` characters), and an id still too
    long keeps its head and its distinguishing tail around "…". Should that make two ids look
    alike, they are shown whole.
    """
    ids = list(ids)
    if all(len(i) <= width for i in ids):
        return ids, ""
    prefix = os.path.commonprefix(ids) if len(ids) > 1 else ""
    keep_from = min(map(len, ids)) - MIN_TAIL_SHOWN  # every id keeps at least this tail
    cuts = [k + 1 for k, ch in enumerate(prefix) if ch in ID_SEPARATORS and k + 1 <= keep_from]
    prefix = prefix[:max(cuts)] if cuts else prefix[:max(keep_from, 0)]
    if len(prefix) < MIN_PREFIX_SHOWN_AS_ELLIPSIS:
        prefix = ""
    shown = [_shorten_middle("…" + i[len(prefix):] if prefix else i, width) for i in ids]
    if len(set(shown)) < len(set(ids)):
        return ids, ""
    return shown, prefix


def _shorten_middle(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    head = (width - 1) // 3
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


def _render(sel: Selection, criteria: str) -> None:
    names = list(sel.criteria_scores[0]) if sel.criteria_scores else []
    labelled = any("reward" in c.labels for c in sel.candidates)
    conf = "n/a" if sel.confidence is None else f"{sel.confidence:.2f}"
    shown, prefix = short_ids([c.id for c in sel.candidates])
    table = Table(title=for_terminal(f"select · {sel.method} · {len(sel.candidates)} candidates · criteria {criteria} · "
                                     f"confidence {conf}"),
                  caption=for_terminal(f"… = {prefix}") if prefix else None)
    table.add_column("#", justify="right")
    table.add_column("candidate", no_wrap=True, min_width=min(max(map(len, shown)), ID_WIDTH))
    table.add_column("win mass", justify="right")
    for name in names:
        table.add_column(name, justify="right")
    if labelled:
        table.add_column("label", justify="right")
    for rank, i in enumerate(sel.ranking):
        cand = sel.candidates[i]
        row = [str(rank + 1), for_terminal(shown[i], "bold" if i == sel.index else ""), f"{sel.scores[i]:.3f}"]
        row += ["—" if sel.criteria_scores[i][n] is None else f"{sel.criteria_scores[i][n]:.3f}" for n in names]
        if labelled:
            row.append(for_terminal(cand.labels.get("reward", "")))
        table.add_row(*row)
    console.print(table)
    console.print(assembled(("reason: ", "bold"), sel.reason.text), highlight=False, soft_wrap=True)
    from veriscale.selection.select import adaptive_calls_text

    u = sel.usage
    console.print(
        f"{sel.n_comparisons} comparisons, {sel.n_judgements} judgements, {u.model_calls} model calls, "
        f"{u.cache_hits} cache hits, {prompt_tokens_text(u.prompt_tokens, u.processed)}"
        + (f", {adaptive_calls_text(sel.calls_saved)} by adaptive stopping" if sel.adaptive else ""),
        style="dim", highlight=False)
    if sel.budget:
        b = sel.budget
        steps = "; ".join(f"{s['step']}: {s['added']} ({s['left']} left)" for s in b["steps"])
        console.print(for_terminal(f"budget {b['budget']}: spent {b['spent']}, stopped with '{b['stop_reason']}'; {steps}"),
                      style="dim", highlight=False, soft_wrap=True)
    biased = [o for o in sel.pair_orders if o["position_bias"]]
    if biased:  # the two slot orders name different winners: the pair's mean is no close call
        pairs = ", ".join(f"{sel.candidates[o['a']].id} vs {sel.candidates[o['b']].id} "
                          f"({o['a_first']:.3f} / {o['b_first']:.3f})" for o in biased[:5])
        more = f" and {len(biased) - 5} more" if len(biased) > 5 else ""
        console.print(for_terminal(f"position bias: {pairs}{more} flip with the slot order (P of the first with it "
                                   "shown first / shown second); see pair_orders in --json"),
                      style="yellow", highlight=False, soft_wrap=True)
    where = f" ({sel.best.source})" if sel.best.source else ""
    console.print(assembled(("picked: ", ""), for_terminal(sel.best.id, "bold"), where), highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    @app.command("select")
    def select_command(
        paths: PathsArg,
        task: TaskOpt = None, method: MethodOpt = "ppt", pivots: PivotsOpt = 2,
        budget_tokens: BudgetOpt = None, budget: DecisionBudgetOpt = None, min_confidence: MinConfOpt = None, adaptive: AdaptiveOpt = True,
        model: o.ModelOpt = None, store: o.StoreOpt = None, scale: o.ScaleOpt = "letters",
        criteria: SelectCriteriaOpt = None, criterion: o.OnlyOpt = None, repeats: SelectRepeatsOpt = None,
        reasoning: o.ReasoningOpt = False, discrete: o.DiscreteOpt = False, seed: SelectSeedOpt = 0,
        refresh: o.RefreshOpt = False, json_out: o.JsonOpt = False, dry_run: o.DryRunOpt = False,
        max_calls: o.MaxCallsOpt = None, concurrency: o.ConcurrencyOpt = None, fmt: FormatOpt = None,
        save_criteria: o.SaveCriteriaOpt = None,
    ) -> None:
        """Pick the best of N runs of one task; prints a ranking, the reason and the pick.

        The task: --task FILE, else a leading plain TASK file, else the task the runs carry.
        Exit 4 when --min-confidence is given and the pick is below it.

        Example: veriscale select examples/terminal_bench/merge-diff-arc-agi-task.jsonl
        """
        with user_errors():
            if min_confidence is not None and not 0.0 < min_confidence <= 1.0:
                raise UserError(f"--min-confidence {min_confidence} is out of range: give a number in (0, 1], e.g. 0.9")
            task_obj, candidates = resolve_inputs(paths, task, fmt)
            took = task_taken_from(task_obj, task)
            if task is not None:
                from veriscale.data.pool import task_key

                carried = {task_key(c.task) for c in candidates} - {""}
                if len(carried) > 1:  # documented: --task overrides the runs' own tasks; say it did
                    note(f"{setting('task')} '{task}' overrides the {len(carried)} different tasks the runs carry: "
                         "every candidate is judged as an answer to it")
            if took is not None:  # the TASK CANDIDATES... form: say so, a user may have meant a candidate
                note(f"took '{took}' as the task (the first path: one plain answer with no task of its own) and "
                     f"{len(candidates)} candidate(s) after it; name the task with {setting('task')} FILE to be explicit")
            cs = o.command_settings(model, store, concurrency)
            backend, opened = o.open_model(cs, notice=not dry_run), o.open_store(cs)
            spec = criteria or default_criteria(candidates)
            task_text, references = runs_task(task_obj, candidates, spec)
            crits, generated = chosen_for(backend, opened, spec, task_text, references + task_references(task, task_text),
                                          save=save_criteria, dry_run=dry_run, max_calls=max_calls)
            if criterion:
                crits = crits.only(criterion)
            settings = SelectionSettings.from_flags(
                cs, criteria=crits, budget=budget, method=method, k=pivots, repeats=repeats, adaptive=adaptive,
                min_confidence=min_confidence, budget_tokens=budget_tokens, seed=seed, scale=scale,
                reasoning=reasoning, discrete=discrete)
            verifier = settings.verifier(backend, store=opened,
                                         refresh=refresh, max_calls=max_calls, concurrency=cs.concurrency)
            from veriscale.selection.select import plan_selection, run_selection

            if not dry_run and shows_images(task_obj, candidates):
                require_seen(verifier.executor)  # a model that does not see them is refused before any verdict
            plan = plan_selection(task_obj, candidates, verifier=verifier, settings=settings)
            if dry_run:
                _print_plan(plan, json_out, took)
                return
            with recorded_run(verifier.executor.store, "select", verifier.model.uri, {
                    "paths": paths, "task": task, "method": method, "k": pivots, "criteria": crits.name,
                    "budget_tokens": plan.budget_tokens, "adaptive": adaptive, "seed": seed,
                    **({"budget": plan.budget} if plan.budget else {})}) as run:
                RunLog(run.store).record_candidates(run.id, candidates)  # for the dashboard's trajectory viewer
                with o.call_progress(plan.model_calls_planned if plan.budget else plan.judgements_planned * plan.calls_per_judgement,
                                     "selecting", not json_out, what="select") as advance:
                    sel = run_selection(plan, verifier=verifier, on_progress=lambda done, planned: advance(),
                                        on_step=lambda step: RunLog(run.store).emit(run.id, "budget", step))
                payload = {**sel.to_dict(), "criteria_set": crits.name, **generated}  # generated: what --criteria auto wrote
                if took is not None:
                    payload["task_taken_from"] = took
                run.finish("ok", payload)
            payload["run_id"] = run.id
            if json_out:
                emit_json(payload, "select")
            else:
                _render(sel, crits.name)
            for text in sel.notes:
                note(text)
            if min_confidence is not None and not sel.decided:
                conf = "none (pointwise has no confidence)" if sel.confidence is None else f"{sel.confidence:.2f}"
                fail(f"the pick {sel.best.id} is not decided: confidence {conf} is below --min-confidence "
                     f"{min_confidence} (gather more evidence: --method round_robin, a larger -k, --reasoning, or a "
                     "stronger --model)", UNDECIDED_EXIT)
