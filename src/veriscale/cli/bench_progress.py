"""``veriscale bench --progress FILE``: VOC of successful vs failed runs, or first-error F1.

    veriscale bench --progress terminal_bench_2.1_trials.jsonl.gz            # 4 tasks whose runs disagree
    veriscale bench --progress progress_processbench_dev.jsonl --limit 0 --yes --json

The default run is a seeded subsample and says its size and cost first; a larger one (``--limit``
above the default or 0, ``--all-tasks``) asks first or needs ``--yes``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from rich.table import Table

from veriscale.bench.progress import DEFAULT_LIMITS, load_progress_data, plan_progress, run_progress
from veriscale.cli import options as o
from veriscale.cli.common import confirm_cost, console, emit_json, err_console, finish_with, note, prompt_tokens_text
from veriscale.engine.run_scope import recorded_run
from veriscale.progress.progress_judge import ProgressJudge
from veriscale.progress.prompt import DEFAULT_PROGRESS_SCALE

SEED_REFERENCE = "published reference (frontier verifier, Terminal-Bench): success 0.848, failure 0.769"


def bench_progress(path: Path, *, limit: Optional[int], seed: int, all_tasks: bool, checkpoints: Optional[str],
                   yes: bool, plot: Optional[Path], output: Optional[Path], model, store, scale: Optional[str],
                   repeats: Optional[int], reasoning: bool, budget_tokens: Optional[int], json_out: bool,
                   dry_run: bool, max_calls: Optional[int], concurrency: Optional[int]) -> None:
    from veriscale.progress.checkpoints import parse_checkpoints

    data = load_progress_data(path, limit, seed, all_tasks)
    wanted = parse_checkpoints(checkpoints) if checkpoints else None
    cs = o.command_settings(model, store, concurrency)
    c = cs.concurrency
    judge = ProgressJudge(o.open_model(cs, notice=not dry_run), store=o.open_store(cs),
                          scale=scale or DEFAULT_PROGRESS_SCALE, repeats=repeats, reasoning=reasoning,
                          budget_tokens=budget_tokens, max_calls=max_calls, concurrency=c)
    plans = plan_progress(judge, data, wanted)
    calls = [call for plan in plans for call in plan.calls]
    est = judge.executor.estimate(calls)
    what = "runs" if data.kind == "voc" else "solutions"
    err_console.print(f"progress bench plan ({data.kind}): {len(plans)} {what}, {len(calls)} checkpoint calls: "
                      f"{est.calls} new ({est.cached} cached), {est.prompt_tokens} prompt tokens before prefix reuse",
                      highlight=False)
    if dry_run:
        if json_out:
            emit_json({"dry_run": True, "kind": data.kind, "items": len(plans), "calls": len(calls),
                       "new_calls": est.calls, "cached": est.cached, "prompt_tokens": est.prompt_tokens},
                      "bench-progress.dry-run")
        return
    default = DEFAULT_LIMITS[data.kind]
    if (limit is not None and (limit == 0 or limit > default)) or all_tasks:
        confirm_cost(f"this goes beyond the default subsample ({default} {'tasks' if data.kind == 'voc' else 'solutions'})", yes)
    with recorded_run(judge.executor.store, "bench --progress", judge.model.uri, {
            "data": str(path), "kind": data.kind, "limit": limit, "seed": seed, "checkpoints": checkpoints}) as run:
        with o.call_progress(len(calls), f"progress bench ({data.kind})", not json_out,
                             what="bench --progress", unit="checkpoint calls") as advance:
            report = run_progress(judge, data, plans, on_call=advance)
        payload = finish_with(run, report.to_dict(), output)
    if plot is not None:
        from veriscale.progress.curve_plot import plot_bench_rows

        plot_bench_rows(report, plot)
    if json_out:
        emit_json(payload, "bench-progress")
        return
    _render(payload)
    for text in report.notes:
        note(text)


def _fmt(value: Any) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _render(payload: dict[str, Any]) -> None:
    metrics = payload["metrics"]
    title = f"bench --progress · {payload['kind']} · {payload['model']} · n={payload['n_items']}"
    table = Table(title=title)
    if payload["kind"] == "voc":
        for col in ("scoring", "mean VOC, successful runs", "mean VOC, failed runs"):
            table.add_column(col, justify="left" if col == "scoring" else "right")
        for name, m in metrics.items():
            by = m["voc_by_outcome"]
            table.add_row(name, f"{_fmt(by['success']['mean_voc'])} (n={by['success']['n']})",
                          f"{_fmt(by['failure']['mean_voc'])} (n={by['failure']['n']})")
        console.print(table)
        console.print(SEED_REFERENCE, style="dim", highlight=False)
    else:
        for col in ("scoring", "first-error F1", "acc. erroneous", "acc. correct", "detector"):
            table.add_column(col, justify="left" if col in ("scoring", "detector") else "right")
        for name, m in metrics.items():
            table.add_row(name, _fmt(m["first_error_f1"]), _fmt(m["accuracy_erroneous"]), _fmt(m["accuracy_correct"]),
                          f"{m['rule']} {m['threshold']:g}")
        console.print(table)
        m = next(iter(metrics.values()))
        console.print(f"detector and threshold tuned on {m['tuned_on']} solutions, F1 reported on the other "
                      f"{m['reported_on']}", style="dim", highlight=False)
    usage = payload["usage"]
    console.print(f"{usage['model_calls']} model calls, {usage['cache_hits']} cache hits, "
                  f"{prompt_tokens_text(usage['prompt_tokens'], usage.get('prompt_tokens_processed'))}", style="dim", highlight=False)
