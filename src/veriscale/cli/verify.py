"""``veriscale score`` and ``veriscale compare``: pointwise and pairwise verdicts."""

from __future__ import annotations

from typing import Annotated, Any, Callable

import typer
from rich.table import Table

from veriscale.models.vision_probe import require_seen
from veriscale.cli.common import console, emit_json, err_console, fail, note, prompt_tokens_text, user_errors
from veriscale.cli import options as o
from veriscale.cli.criteria_auto import chosen_criteria, task_references
from veriscale.data.task_order import task_order_note
from veriscale.data.images import load_images
from veriscale.data.text_input import read_text_input
from veriscale.data.visual_input import read_candidate_input
from veriscale.engine.sync_facade import Estimate
from veriscale.engine.run_scope import recorded_run
from veriscale.verify.criteria_auto import auto_count
from veriscale.verify.results import CompareResult, ScoreResult
from veriscale.verify.reward import Verifier
from veriscale.shown_text import for_terminal


def _verifier(model: str, store, scale: str, criteria: str, only, repeats: int, reasoning: bool,
              discrete: bool, seed: int, refresh: bool, max_calls, concurrency: int, *, dry_run: bool,
              task: tuple[str, str], save=None) -> tuple[Verifier, dict[str, Any]]:
    """The verifier, and what the run records of generated criteria (``--criteria auto``; else nothing)."""
    cs = o.command_settings(model, store, concurrency)
    v = Verifier(o.open_model(cs, notice=not dry_run), store=o.open_store(cs), scale=scale,
                 criteria="general" if auto_count(criteria) else criteria,
                 repeats=repeats, reasoning=reasoning, discrete=discrete, seed=seed,
                 refresh=refresh, max_calls=max_calls, concurrency=cs.concurrency, **cs.injection())
    crits, extra = chosen_criteria(v.executor, criteria, task[1], task_references(task[0], task[1]), save=save,
                                   dry_run=dry_run)
    v.criteria = crits.only(only) if only else crits
    return v, extra


def _print_estimate(est: Estimate, as_json: bool, command: str) -> None:
    payload = {"dry_run": True, "model_calls": est.calls, "cached_calls": est.cached,
               "prompt_tokens": est.prompt_tokens, "prompt_tokens_exact": est.token_count_exact}
    if as_json:
        emit_json(payload, f"{command}.dry-run")
        return
    approx = "" if est.token_count_exact else " (estimated at 4 characters a token)"
    console.print(f"would make {est.calls} model calls ({est.cached} already cached) sending "
                  f"{est.prompt_tokens} prompt tokens{approx}; prefix reuse processes fewer")


def _report_problems(result: Any) -> None:
    for text in result.notes:
        note(text)
    if result.low_label_mass:
        err_console.print("[yellow]warning:[/] low label mass: the model put little probability on the score "
                          "labels, so this verdict is unreliable (try another --scale or a stronger --model)", highlight=False)


def _execute(v: Verifier, command: str, args: dict[str, Any], calls: list, run: Callable[[Callable], Any],
             render: Callable[[Any], None], *, dry_run: bool, json_out: bool, extra: dict[str, Any] | None = None) -> None:
    """The flow every verdict command shares: estimate, or record a run, call with a progress
    bar, store the result, render it, and exit non-zero when the verdict failed."""
    if dry_run:
        _print_estimate(v.executor.estimate(calls), json_out, command)
        return
    with recorded_run(v.executor.store, command, v.model.uri, args) as recorded:  # every call is linked to it
        with o.call_progress(len(calls), f"{command} calls", not json_out, what=command) as advance:
            result = run(advance)
        payload = {**result.to_dict(), **(extra or {})}  # extra: the generated criteria, when there are
        recorded.finish("failed" if result.failed else "ok", payload)
    payload["run_id"] = recorded.id
    if json_out:
        emit_json(payload, command)
    else:
        render(result)
    _report_problems(result)
    if result.failed:
        fail("model calls failed, so there is no verdict: " + "; ".join(result.errors[:3])
             + " (rerun to retry only the failed calls)", 3)


def _usage_line(result: Any) -> str:
    u = result.usage
    return (f"{u.model_calls} model calls, {u.cache_hits} cache hits, {prompt_tokens_text(u.prompt_tokens, u.processed)}"
            + (f", {u.failed_calls} failed" if u.failed_calls else "")
            + (f", {u.cancelled_calls} cancelled" if u.cancelled_calls else ""))


def _render_score(result: ScoreResult) -> None:
    table = Table(title=for_terminal(f"score · {result.model} · {result.scale} · K={result.repeats_effective}"))
    table.add_column("criterion")
    table.add_column("reward", justify="right")
    table.add_column("label mass", justify="right")
    for name, c in result.criteria.items():
        table.add_row(for_terminal(name), _fmt(c["reward"]), f"{c['label_mass']:.2f}" + (" !" if c["low_label_mass"] else ""))
    table.add_row("[bold]overall", f"[bold]{_fmt(result.reward, result.reward_se('candidate'))}", "")
    console.print(table)
    console.print(_usage_line(result), style="dim")


def _render_compare(result: CompareResult) -> None:
    table = Table(title=for_terminal(f"compare · {result.model} · {result.scale} · K={result.repeats_effective}"))
    for col in ("criterion", "reward A", "reward B", "label mass A / B"):
        table.add_column(col, justify="left" if col == "criterion" else "right")
    for name, c in result.criteria.items():
        table.add_row(for_terminal(name), _fmt(c["reward_a"]), _fmt(c["reward_b"]),
                      f"{c['label_mass']['a']:.2f} / {c['label_mass']['b']:.2f}" + (" !" if c["low_label_mass"] else ""))
    table.add_row("[bold]overall", f"[bold]{_fmt(result.reward_a, result.reward_se('a'))}",
                  f"[bold]{_fmt(result.reward_b, result.reward_se('b'))}", "")
    console.print(table)
    if result.p_a_wins is not None:
        pick = "A" if result.p_a_wins > 0.5 else "B" if result.p_a_wins < 0.5 else "neither (tie)"
        console.print(f"P(A beats B) = [bold]{result.p_a_wins:.3f}[/] (tau {result.tau:g}) → prefers {pick}")
        orders = result.slot_orders
        if orders["position_bias"]:  # the two slot orders name different winners: the mean is no close call
            console.print(f"position bias: P(A beats B) is {orders['a_first']:.3f} with A shown first and "
                          f"{orders['b_first']:.3f} with B shown first; see slot_orders in --json",
                          style="yellow", highlight=False, soft_wrap=True)
    console.print(_usage_line(result), style="dim")


def _fmt(x: float | None, se: float | None = None) -> str:
    """A reward, with the standard error of a sampled read beside it (``0.612 ± 0.041``)."""
    if x is None:
        return "failed"
    return f"{x:.3f}" if se is None else f"{x:.3f} ± {se:.3f}"


def register(app: typer.Typer) -> None:
    @app.command()
    def score(
        task: Annotated[str, typer.Argument(help="Task file (text, Markdown, JSON) or - for stdin.")],
        candidate: Annotated[str, typer.Argument(help="Candidate file or - for stdin; an image, a video or a folder of frames for a vision model.")],
        model: o.ModelOpt = None, store: o.StoreOpt = None, scale: o.ScaleOpt = "letters",
        criteria: o.CriteriaOpt = "general", criterion: o.OnlyOpt = None, repeats: o.RepeatsOpt = None,
        reasoning: o.ReasoningOpt = False, discrete: o.DiscreteOpt = False, seed: o.SeedOpt = 0,
        refresh: o.RefreshOpt = False, json_out: o.JsonOpt = False, dry_run: o.DryRunOpt = False,
        max_calls: o.MaxCallsOpt = None, concurrency: o.ConcurrencyOpt = None, save_criteria: o.SaveCriteriaOpt = None,
    ) -> None:
        """Score one candidate against the task (reward in [0, 1]).

        Example: veriscale score examples/pair/task.md examples/pair/a.md --criteria general --json
        """
        with user_errors():
            task_text = read_text_input(task, "task")
            cand_text, cand_refs = read_candidate_input(candidate, "candidate")
            images = {"candidate": load_images(cand_refs)} if cand_refs else None
            if (said := task_order_note({task: task_text, candidate: cand_text}, task, "score")) is not None:
                note(said)
            v, extra = _verifier(model, store, scale, criteria, criterion, repeats, reasoning, discrete, seed,
                                 refresh, max_calls, concurrency, dry_run=dry_run, task=(task, task_text),
                                 save=save_criteria)
            if images and not dry_run:
                require_seen(v.executor)  # a model that does not see images is refused before any verdict
            calls, _ = v.plan_score(task_text, cand_text, images)
            _execute(v, "score", {"task": task, "candidate": candidate, "scale": scale, "criteria": criteria,
                                  "repeats": repeats}, calls,
                     lambda advance: v.score(task_text, cand_text, progress=advance, images=images),
                     _render_score, dry_run=dry_run, json_out=json_out, extra=extra)

    @app.command()
    def compare(
        task: Annotated[str, typer.Argument(help="Task file (text, Markdown, JSON) or - for stdin.")],
        a: Annotated[str, typer.Argument(help="Candidate A file.")],
        b: Annotated[str, typer.Argument(help="Candidate B file.")],
        model: o.ModelOpt = None, store: o.StoreOpt = None, scale: o.ScaleOpt = "letters",
        criteria: o.CriteriaOpt = "general", criterion: o.OnlyOpt = None, repeats: o.RepeatsOpt = None,
        reasoning: o.ReasoningOpt = False, discrete: o.DiscreteOpt = False, seed: o.SeedOpt = 0,
        refresh: o.RefreshOpt = False, json_out: o.JsonOpt = False, dry_run: o.DryRunOpt = False,
        max_calls: o.MaxCallsOpt = None, concurrency: o.ConcurrencyOpt = None, save_criteria: o.SaveCriteriaOpt = None,
    ) -> None:
        """Compare two candidates in one context: both rewards and P(A beats B).

        Example: veriscale compare examples/pair/task.md examples/pair/a.md examples/pair/b.md
        """
        with user_errors():
            task_text = read_text_input(task, "task")
            a_text, a_refs = read_candidate_input(a, "candidate A")
            b_text, b_refs = read_candidate_input(b, "candidate B")
            images = {"a": load_images(a_refs), "b": load_images(b_refs)} if a_refs or b_refs else None
            if (said := task_order_note({task: task_text, a: a_text, b: b_text}, task, "compare")) is not None:
                note(said)
            v, extra = _verifier(model, store, scale, criteria, criterion, repeats, reasoning, discrete, seed,
                                 refresh, max_calls, concurrency, dry_run=dry_run, task=(task, task_text),
                                 save=save_criteria)
            if images and not dry_run:
                require_seen(v.executor)
            calls, _ = v.plan_compare(task_text, a_text, b_text, images=images)
            _execute(v, "compare", {"task": task, "a": a, "b": b, "scale": scale, "criteria": criteria,
                                    "repeats": repeats}, calls,
                     lambda advance: v.compare(task_text, a_text, b_text, progress=advance, images=images),
                     _render_compare, dry_run=dry_run, json_out=json_out, extra=extra)
