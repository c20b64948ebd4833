"""``veriscale bench``: measure the verifier on labelled pairs or labelled pools of runs.

    veriscale bench pairwise_dev.jsonl                                  # 10 pairs, seed 0
    veriscale bench pairwise_dev.jsonl --sweep g=2,5,20 --discrete-vs-continuous --yes --plot g.png
    veriscale bench terminal_bench_2.1_trials.jsonl.gz --limit 2 --json
    veriscale bench pairs.jsonl --limit 0 --yes --executor ray --address 10.0.0.5:6379   # items as Ray tasks

Pairs (``instruction``, ``output_1``, ``output_2``, ``label`` 1|2): pairwise accuracy, tie rate,
SNR. Pools (labelled runs grouped by task): pass@1, oracle pass@N, random pick, selected, and
comparisons, calls and tokens. Default: a fixed seeded subsample (10 pairs or 2 pools; pools
only from tasks whose runs disagree). Everything beyond it (``--limit 0`` = all, a larger
``--limit``, ``--all-tasks``, any ``--sweep``) prints its cost first and asks, or needs ``--yes``.
Calls are cached in the store: an interrupted bench resumes where it stopped.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.table import Table

from veriscale.cli import options as o
from veriscale.cli.common import confirm_cost, console, emit_json, err_console, finish_with, user_errors
from veriscale.cli.flags import cli_text
from veriscale.engine.run_scope import recorded_run
from veriscale.errors import UserError, setting
from veriscale.selection.settings import METHODS, SelectionSettings
from veriscale.verify.criteria import load_criteria
from veriscale.verify.criteria_auto import auto_count
from veriscale.shown_text import for_terminal

if TYPE_CHECKING:  # the bench machinery (numpy) is imported when the command runs
    from veriscale.bench.bench_runner import BenchEstimate, BenchReport

DEFAULT_LIMITS = {"pairs": 10, "pools": 2}

DataArg = Annotated[Optional[str], typer.Argument(help="JSONL of labelled pairs, or labelled runs (any importable format) grouped by task.")]
ProgressOpt = Annotated[Optional[Path], typer.Option("--progress", help="Progress bench instead: labelled runs (VOC of successes vs failures) or step-labelled solutions (first-error F1).")]
CheckpointsOpt = Annotated[Optional[str], typer.Option("--checkpoints", help="--progress on runs: score these steps (default: up to 10 evenly spaced).")]
BenchScaleOpt = Annotated[Optional[str], typer.Option("--scale", help="letters[:G], digits[:G], yesno (default letters; --progress: digits).")]
KindOpt = Annotated[Optional[str], typer.Option("--kind", help="pairs or pools (default: detected from the first record).")]
LimitOpt = Annotated[Optional[int], typer.Option("--limit", help="Items in the seeded subsample (default 10 pairs / 2 pools; 0 = all).")]
BenchSeedOpt = Annotated[int, typer.Option("--seed", help="Seed of the subsample, the random-pick baseline and PPT.")]
AllTasksOpt = Annotated[bool, typer.Option("--all-tasks", help="Pools: include tasks whose runs all agree (no choice to make).")]
SweepOpt = Annotated[Optional[list[str]], typer.Option("--sweep", help="AXIS=V1,V2 over g (scale size), k (pivots), c (criteria), repeats; repeatable.")]
DvcOpt = Annotated[bool, typer.Option("--discrete-vs-continuous", help="Also judge in discrete mode (argmax label); shares the cached calls.")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Proceed without asking when the run goes beyond the default subsample.")]
PlotOpt = Annotated[Optional[Path], typer.Option("--plot", help="Write a PNG plot here.")]
OutputOpt = Annotated[Optional[Path], typer.Option("--output", "-o", help="Also write the JSON report to this file.")]
MethodOpt = Annotated[str, typer.Option("--method", help=f"Pools: selection method ({', '.join(METHODS)}).")]
PivotsOpt = Annotated[int, typer.Option("--pivots", "-k", help="Pools: PPT pivots k.")]
BenchRepeatsOpt = Annotated[Optional[int], typer.Option("--repeats", help="Pairs: K judgements per pair (default 2 = both slot orders); pools: per comparison.")]
BudgetOpt = Annotated[Optional[int], typer.Option("--budget-tokens", help="Render budget per candidate in tokens (default: fits the context, capped for speed).")]
AdaptiveOpt = Annotated[bool, typer.Option("--adaptive/--no-adaptive", help="Pools: stop each selection once decided.")]
BenchCriteriaOpt = Annotated[Optional[str], typer.Option("--criteria", "-c", help="Built-in set or Markdown file (default: general for pairs, agent for pools); auto (auto:N) writes each task's criteria with the model; a comma list (general,auto) benches each choice.")]


def _print_estimate(est: BenchEstimate, n_items: int, n_configs: int, kind: str) -> None:
    what = "at most " if est.upper_bound else ""
    cached = f" ({est.cached_calls} already cached)" if not est.upper_bound else ""
    approx = "" if est.tokens_exact else ", tokens estimated at 4 characters each"
    err_console.print(
        f"bench plan: {n_items} {kind} × {n_configs} configuration(s): {what}{est.model_calls} new model calls"
        f"{cached}, {what}{est.prompt_tokens} prompt tokens before prefix reuse{approx}", highlight=False)


def _fmt(value, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _render(report: BenchReport) -> None:
    table = Table(title=for_terminal(f"bench · {report.kind} · {Path(report.data).name} · {report.model} · "
                                     f"n={len(report.items)} (seed {report.seed})"))
    table.add_column("configuration")
    if report.kind == "pairs":
        cols = [("accuracy", "accuracy"), ("tie rate", "tie_rate"), ("SNR", "snr"), ("failed", "failed")]
    else:
        cols = [("pass@1", "pass_at_1"), ("random", "random_pick"), ("selected", "selected"), ("oracle", "oracle"),
                ("compar.", "comparisons"), ("failed", "failed")]
    for title, _ in cols:
        table.add_column(title, justify="right")
    table.add_column("calls", justify="right")
    table.add_column("tokens", justify="right")  # sent/processed: one column, so the table fits 80 columns
    table.add_column("wall s", justify="right")
    for row in report.rows:
        processed = row.usage.processed
        table.add_row(for_terminal(row.label), *[_fmt(row.metrics[key]) for _, key in cols], str(row.usage.model_calls),
                      f"{row.usage.prompt_tokens}/{'?' if processed is None else processed}", f"{row.wall_s:.1f}")
    console.print(table)
    console.print("accuracy counts ties as half; tokens are prompt tokens sent/processed by the model (?: the "
                  "server did not say); strict accuracy, margins and per-task picks are in --json",
                  style="dim", highlight=False)
    for note in report.notes:
        console.print(for_terminal(f"note: {cli_text(note)}"), style="dim", highlight=False)


def register(app: typer.Typer) -> None:
    @app.command("bench")
    def bench_command(
        data: DataArg = None, progress: ProgressOpt = None, checkpoints: CheckpointsOpt = None, kind: KindOpt = None, limit: LimitOpt = None, seed: BenchSeedOpt = 0,
        all_tasks: AllTasksOpt = False, sweep: SweepOpt = None, discrete_vs_continuous: DvcOpt = False,
        yes: YesOpt = False, plot: PlotOpt = None, output: OutputOpt = None, method: MethodOpt = "ppt",
        pivots: PivotsOpt = 2, repeats: BenchRepeatsOpt = None, budget_tokens: BudgetOpt = None,
        adaptive: AdaptiveOpt = True, model: o.ModelOpt = None, store: o.StoreOpt = None,
        scale: BenchScaleOpt = None, criteria: BenchCriteriaOpt = None, criterion: o.OnlyOpt = None, reasoning: o.ReasoningOpt = False,
        discrete: o.DiscreteOpt = False, json_out: o.JsonOpt = False, dry_run: o.DryRunOpt = False,
        max_calls: o.MaxCallsOpt = None, concurrency: o.ConcurrencyOpt = None,
        executor: o.ExecutorOpt = "local", address: o.AddressOpt = None,
    ) -> None:
        """Measure the verifier on labelled pairs (accuracy, ties, SNR) or pools (pass@1, oracle, selected).

        Example: veriscale bench pairs.jsonl --limit 4 --plot bench.png   (one labelled pair or run a line)
        """
        with user_errors():
            if (data is None) == (progress is None):
                raise UserError("give the bench data (pairs or pools), or --progress FILE for a progress bench (not both)")
            if progress is not None:
                if executor != "local" or address is not None:
                    raise UserError(f"{setting('executor', executor)} applies to a bench of pairs or pools: a "
                                    "progress bench runs here (drop it)")
                from veriscale.cli.bench_progress import bench_progress

                bench_progress(progress, limit=limit, seed=seed, all_tasks=all_tasks, checkpoints=checkpoints, yes=yes,
                               plot=plot, output=output, model=model, store=store, scale=scale, repeats=repeats,
                               reasoning=reasoning, budget_tokens=budget_tokens, json_out=json_out, dry_run=dry_run,
                               max_calls=max_calls, concurrency=concurrency)
                return
            if checkpoints is not None:
                raise UserError("--checkpoints applies to a progress bench: add --progress FILE")
            from veriscale.bench.datasets import detect_kind, load_labelled_pools, load_pairs, sample
            from veriscale.bench.bench_runner import Bench, BenchConfig, BenchReport, expand_configs, parse_sweeps
            from veriscale.bench.criteria_choices import criteria_choices, run_choices

            scale = scale or "letters"
            kind = kind or detect_kind(data)
            if kind not in DEFAULT_LIMITS:
                raise UserError(f"--kind {kind} is unknown: use pairs or pools")
            if method not in METHODS:
                raise UserError(f"--method {method} is unknown: use one of {', '.join(METHODS)}")
            if plot is not None and plot.suffix.lower() != ".png":
                raise UserError(f"--plot {plot} should end in .png: the plot is written as PNG")
            sweeps = parse_sweeps(sweep or [])
            if kind == "pairs" and "k" in sweeps:
                raise UserError("--sweep k applies to pools (PPT pivots): for pairs sweep g, c or repeats")
            base = BenchConfig(scale=scale, repeats=repeats, k=pivots, discrete=discrete)
            configs = expand_configs(base, sweeps, discrete_vs_continuous=discrete_vs_continuous)
            default_limit = DEFAULT_LIMITS[kind]
            chosen_limit = default_limit if limit is None else limit
            notes = []
            if kind == "pairs":
                everything = load_pairs(data)
                items = sample(everything, chosen_limit or None, seed)
                ids = [p.id for p in items]
            else:
                everything = load_labelled_pools([data])
                eligible = everything if all_tasks else [p for p in everything if p.disagrees]
                if not eligible:
                    raise UserError(f"no task in '{data}' has runs that disagree: pass --all-tasks to bench them anyway")
                if not all_tasks:
                    notes.append(f"{len(eligible)} of {len(everything)} tasks have runs that disagree; "
                                 "only those are sampled (--all-tasks for every task)")
                items = sample(eligible, chosen_limit or None, seed)
                ids = [p.task_id for p in items]
            notes.append(f"subsample: {len(items)} of {len(everything)} {kind} with seed {seed}")
            crit_name = criteria or ("general" if kind == "pairs" else "agent")
            choices = criteria_choices(crit_name)
            packs = [c for c in choices if auto_count(c) is None]  # the plan and estimate are the first pack's
            crits = load_criteria(packs[0] if packs else ("general" if kind == "pairs" else "agent"))
            if criterion:
                crits = crits.only(criterion)
            settings = SelectionSettings(method=method, k=pivots, repeats=repeats, adaptive=adaptive,
                                         budget_tokens=budget_tokens, seed=seed, scale=scale, criteria=crits,
                                         reasoning=reasoning, discrete=discrete)
            runner = o.ray_executor(executor, address, start=not dry_run)
            cs = o.command_settings(model, store, concurrency)
            bench = Bench(o.open_model(cs, notice=not dry_run), o.open_store(cs), settings,
                          max_calls=max_calls, concurrency=cs.concurrency, executor=runner)
            plan = bench.plan_pairs(items, configs) if kind == "pairs" else bench.plan_pools(items, configs)
            estimate = bench.estimate(plan)
            if len(choices) > 1 or packs != choices:
                notes.append(f"criteria choices {', '.join(choices)}: the estimate is for {crits.name} alone; "
                             "auto adds one call a task to write its criteria, and each choice its own judging")
            _print_estimate(estimate, len(items), len(configs), kind)
            from veriscale.cli.settings import current as _current
            from veriscale.engine.prices import price_table

            report = BenchReport(kind, data, bench.model.uri, crit_name, chosen_limit or None, seed, ids, estimate,
                                 notes=notes, prices=price_table(_current()))
            if dry_run:
                if json_out:
                    emit_json({"dry_run": True, **report.to_dict()}, "bench.dry-run")
                return
            beyond = []
            if sweeps:
                beyond.append(f"a sweep of {len(configs)} configurations")
            if chosen_limit == 0 or chosen_limit > default_limit:
                beyond.append(f"{len(items)} {kind} (default {default_limit})")
            if all_tasks:
                beyond.append("tasks without disagreement")
            if beyond:
                confirm_cost("this goes beyond the default subsample: " + ", ".join(beyond), yes)
            with recorded_run(bench.store, "bench", bench.model.uri, {
                    "data": data, "kind": kind, "limit": chosen_limit, "seed": seed, "sweep": sweep,
                    "discrete_vs_continuous": discrete_vs_continuous, "criteria": crit_name,
                    **({"executor": executor} if runner is not None else {})}) as run:
                with o.call_progress(len(items) * len(configs) * len(choices), f"bench {kind}", not json_out,
                                     what="bench", unit=kind if len(configs) == 1 else f"{kind} x configurations") as advance:
                    if choices == [crit_name] and packs:
                        report.rows = bench.run(plan, on_progress=lambda done, total: advance())
                    else:
                        report.rows = run_choices(bench, kind, items, configs, choices, lambda done, total: advance())
                report.notes += bench.notes
                payload = finish_with(run, report.to_dict(), output)
            if plot is not None:
                from veriscale.bench.report_plot import plot_report

                plot_report(report, plot)
            if json_out:
                emit_json(payload, "bench")
            else:
                _render(report)
                if plot is not None:
                    console.print(f"plot: {plot}", highlight=False)
            failed = sum(r.metrics.get("failed", 0) for r in report.rows)
            if failed:
                err_console.print(f"[yellow]warning:[/] {failed} item(s) had no verdict (failed model calls); "
                                  "they are left out of the metrics, and a rerun retries them", highlight=False)
