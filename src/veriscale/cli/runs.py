"""``veriscale runs list|show|export|cost``: what earlier commands did and cost, from the store;
``runs prune|vacuum``: its upkeep (:mod:`veriscale.engine.store_upkeep`)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from veriscale.cli import options as o
from veriscale.cli.common import cli_data, console, emit_json, escape_c1, user_errors, with_schema
from veriscale.cli.flags import cli_text
from veriscale.engine.run_liveness import settle_dead_runs
from veriscale.engine.ids import parse_id
from veriscale.engine.run_summary import run_summary
from veriscale.engine.store import Store
from veriscale.errors import UserError
from veriscale.shown_text import assembled, for_terminal

runs_app = typer.Typer(help="Inspect and export earlier runs recorded in the store.", no_args_is_help=True)


def _settled(store: Store) -> Store:
    """``store``, its runs whose process died without ending them rewritten as interrupted."""
    settle_dead_runs(store)
    return store


def _when(ts: float | None) -> str:
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S") if ts else "-"


@runs_app.command("list")
def list_runs(store: o.StoreOpt = None, limit: Annotated[int, typer.Option(min=1, help="How many, newest first.")] = 20,
              json_out: o.JsonOpt = False, redact: o.RedactOpt = None, no_redact: o.NoRedactOpt = False) -> None:
    """List recent runs with each one's verdict (pick, P, reward) or error (secrets redacted).

    Example: veriscale runs list --limit 5
    """
    with user_errors():
        redactor = o.output_redactor(redact, no_redact)
        runs = _settled(o.open_store(store)).runs(limit)
        if json_out:
            emit_json(redactor([{"id": r.id, "command": r.command, "model": r.model, "status": r.status,
                                 "created_at": r.created_at, "args": r.args, "summary": run_summary(r)} for r in runs]), "runs-list")
            return
        table = Table(title="runs")
        for col in ("id", "when", "command", "model", "status", "summary"):
            table.add_column(col)
        for r in runs:
            table.add_row(str(r.id), _when(r.created_at), for_terminal(r.command), for_terminal(redactor(r.model or "")),
                          for_terminal(r.status), for_terminal(redactor(cli_text(run_summary(r)))))
        console.print(table)


def _run_doc(st: Store, rec, *, calls: str | None = None) -> dict:
    """One run as ``show`` and ``export RUN`` write it; ``calls``: None, "summary" (key, kind, status,
    tokens) or "full" (each call's whole record: prompt, response, error)."""
    doc = {"id": rec.id, "command": rec.command, "model": rec.model, "status": rec.status,
           "created_at": rec.created_at, "finished_at": rec.finished_at, "args": rec.args, "result": rec.result,
           "cost": st.run_cost(rec.id), "heartbeat_at": rec.heartbeat_at,
           "process": {"host": rec.host, "boot_id": rec.boot_id, "pid": rec.pid, "start": rec.pid_start}}
    if rec.damaged:
        doc["damaged"] = list(rec.damaged)
    children = st.child_runs(rec.id)
    if children:
        doc["tasks"] = [{"id": c.id, "task": c.args.get("task"), "status": c.status,
                         "phases": c.result.get("phases") if isinstance(c.result, dict) else None,
                         "cost": st.run_cost(c.id)} for c in children]
    if calls:
        linked = [{**call, "run_id": r.id} for r in [rec, *children] for call in st.run_calls(r.id)]
        if calls == "full":
            records = {call["key"]: st.call(call["key"]) for call in linked}
            linked = [{**call, "record": records[call["key"]]} for call in linked]
        doc["calls"] = linked
    return doc


def _found(st: Store, run_id: str):
    rid = parse_id(run_id, "run", "`veriscale runs list`")
    rec = st.run(rid)
    if rec is None:
        raise UserError(f"there is no run {rid} in the store: see `veriscale runs list` for ids")
    return rec


@runs_app.command("show")
def show_run(run_id: Annotated[str, typer.Argument(help="Run id from `runs list`.")], store: o.StoreOpt = None,
             calls: Annotated[bool, typer.Option("--calls", help="Also list every model call the run used.")] = False,
             redact: o.RedactOpt = None, no_redact: o.NoRedactOpt = False) -> None:
    """Print one run as JSON: arguments, result, cost (from its linked calls), the process that ran
    it and its last heartbeat and, for a harness run, each task with its phases and cost. Secrets
    in it are redacted (docs/SERVER.md, "Secrets"). Example: veriscale runs show 3 --calls"""
    with user_errors():
        redactor = o.output_redactor(redact, no_redact)
        st = _settled(o.open_store(store))
        emit_json(redactor(_run_doc(st, _found(st, run_id), calls="summary" if calls else None)), "run")


@runs_app.command("export")
def export_runs(run_id: Annotated[Optional[str], typer.Argument(
                    help="Only this run, with its tasks and every call it used (prompt and response), "
                         "as one JSON document.")] = None,
                out: Annotated[Optional[Path], typer.Option("--out", "-o", help="File to write (default stdout).")] = None,
                jsonl: Annotated[bool, typer.Option("--jsonl", help="With RUN: one line for the run, then one a call.")] = False,
                store: o.StoreOpt = None, redact: o.RedactOpt = None, no_redact: o.NoRedactOpt = False) -> None:
    """Export every run as JSON Lines, or one run with its calls. Known secret shapes (API keys,
    tokens, private keys, and --redact patterns) are redacted unless --no-redact.
    Example: veriscale runs export -o runs.jsonl; veriscale runs export 3 -o run3.json"""
    with user_errors():
        redactor = o.output_redactor(redact, no_redact)
        st = _settled(o.open_store(store))
        if run_id is None:
            docs = [with_schema({"id": r.id, "command": r.command, "model": r.model, "status": r.status,
                                 "created_at": r.created_at, "args": r.args, "result": r.result}, "runs-export")
                    for r in reversed(st.runs())]
            what = f"{len(docs)} runs"
        else:
            doc = _run_doc(st, _found(st, run_id), calls="full")
            docs = [with_schema({k: v for k, v in doc.items() if k != "calls"}, "run"),
                    *with_schema(doc["calls"], "call")] if jsonl else [with_schema(doc, "run")]
            what = f"run {doc['id']} and its {len(doc['calls'])} calls"
        if run_id is not None and not jsonl:
            text = escape_c1(json.dumps(cli_data(redactor(docs[0])), indent=2, ensure_ascii=False, default=str)) + "\n"
        else:
            lines = [json.dumps(cli_data(redactor(d)), default=str) for d in docs]
            text = "\n".join(lines) + ("\n" if lines else "")
        if out is None:
            typer.echo(text, nl=False)
        else:
            try:
                out.write_text(text, encoding="utf-8")
            except OSError as exc:
                raise UserError(f"cannot write '{out}' ({exc.strerror}): choose a writable path") from None
            console.print(assembled((f"wrote {what} to ", ""), str(out)), highlight=False)


def _tokens(value) -> str:
    return "unknown" if value is None else f"{value:,}"


def run_cost_doc(st: Store, rec, prices=None) -> dict:
    """What ``runs cost`` reports: the run's (and its tasks') calls, tokens sent / processed / cached,
    completion tokens, model time, wall time and, with a price table, money."""
    from veriscale.engine.run_cost import totals

    ids = [rec.id] + [c.id for c in st.child_runs(rec.id)]
    cost = totals([call for rid in ids for call in st.run_calls(rid)], prices)
    wall = (rec.finished_at - rec.created_at) if rec.finished_at and rec.created_at else None
    return {"id": rec.id, "command": rec.command, "status": rec.status,
            "wall_s": None if wall is None else round(wall, 3), **cost}


@runs_app.command("cost")
def cost_run(run_id: Annotated[str, typer.Argument(help="Run id from `runs list`.")], store: o.StoreOpt = None,
             prices: Annotated[Optional[str], typer.Option(
                 "--prices", help="US$ per million tokens: MODEL=PROMPT/CACHED/COMPLETION;... "
                                  "(or $VERISCALE_PRICES, or the config file's \\[prices]); unset: no money.")] = None,
             json_out: o.JsonOpt = False) -> None:
    """What one run cost: model calls, cache hits, prompt tokens sent, processed and served from cache
    (where the server said so; otherwise "unknown"), completion tokens, model time, wall time, and
    money when a price table is set. Example: veriscale runs cost 3 --json"""
    from veriscale.cli.settings import current
    from veriscale.engine.prices import price_table

    with user_errors():
        table = price_table(current().with_flags(prices=prices))
        st = _settled(o.open_store(store))
        doc = run_cost_doc(st, _found(st, run_id), table)
        if json_out:
            emit_json(doc, "runs-cost")
            return
        out = Table(title=for_terminal(f"run {doc['id']} ({doc['command']}, {doc['status']}): cost"))
        out.add_column("what")
        out.add_column("value", justify="right")
        processed_note = "" if doc["unreported_calls"] == 0 else \
            f" ({doc['unreported_calls']} calls' server did not say; {doc['processed_reported']:,} from the rest)"
        rows = [("model calls", f"{doc['calls']:,}"), ("cache hits (free)", f"{doc['cache_hits']:,}"),
                ("failed / cancelled", f"{doc['failed']} / {doc['cancelled']}"),
                ("prompt tokens sent", _tokens(doc["prompt_tokens"])),
                ("prompt tokens processed", _tokens(doc["prompt_tokens_processed"]) + processed_note),
                ("prompt tokens from cache", _tokens(doc["cached_prompt_tokens"])),
                ("completion tokens", _tokens(doc["completion_tokens"])),
                ("model time (summed)", f"{doc['latency_s']:.2f} s"),
                ("wall time", "running" if doc["wall_s"] is None else f"{doc['wall_s']:.2f} s")]
        money = doc.get("money")
        if money is not None:
            usd = "unknown" if money["usd"] is None else f"${money['usd']:.6f}"
            if money["unpriced"]:
                usd += f" (no price for {', '.join(money['unpriced'])})"
            elif not money["exact"]:
                usd += " (at most: some server did not say what it served from cache)"
            rows.append(("money", usd))
        for what, value in rows:
            out.add_row(what, for_terminal(value))
        console.print(out)


def _n(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def _mib(size: int) -> str:
    return f"{size / 2**20:,.1f} MiB"


@runs_app.command("prune")
def prune_runs(older_than: Annotated[Optional[str], typer.Option(
                   "--older-than", help="Only runs that ended this long ago: 30d, 12h, 90m, 45s (or seconds).")] = None,
               kind: Annotated[Optional[list[str]], typer.Option(
                   "--kind", help="Only runs of this command, e.g. select (repeatable).")] = None,
               status: Annotated[Optional[list[str]], typer.Option(
                   "--status", help="Only runs that ended so: ok, failed, cancelled, interrupted (repeatable).")] = None,
               orphans: Annotated[bool, typer.Option(
                   "--orphans", help="Also remove the calls no run links to (made outside any run).")] = False,
               dry_run: Annotated[bool, typer.Option("--dry-run", help="Only report what would be removed.")] = False,
               then_vacuum: Annotated[bool, typer.Option(
                   "--vacuum", help="Then rewrite the store file without its free space (runs vacuum).")] = False,
               store: o.StoreOpt = None, json_out: o.JsonOpt = False) -> None:
    """Remove the runs every filter selects, with their child runs, events and call links, and the
    model calls only they used (a call a kept run used stays); a running run is never removed.
    Example: veriscale runs prune --older-than 30d --status ok --dry-run"""
    from veriscale.engine.store_upkeep import parse_duration, prune, vacuum

    with user_errors():
        if older_than is None and not kind and not status and not orphans:
            raise UserError("runs prune removes nothing without a filter: give --older-than 30d, --kind select, "
                            "--status failed or --orphans (see veriscale runs prune --help)")
        age = None if older_than is None else parse_duration(older_than, "--older-than")
        st = o.open_store(store)
        report = prune(st, older_than=age, kinds=kind, statuses=status, orphans=orphans, dry_run=dry_run)
        doc = report.to_dict()
        if then_vacuum and not dry_run:
            doc["vacuum"] = vacuum(st).to_dict()
        if json_out:
            emit_json(doc, "runs-prune")
            return
        verb = "would remove" if dry_run else "removed"
        children = f" ({report.child_runs:,} of them child runs)" if report.child_runs else ""
        lines = [(f"{verb} {_n(report.runs, 'run')}{children}, {_n(report.calls, 'model call')}, "
                  f"{_n(report.events, 'event')} and {_n(report.steps, 'step')} from {st.path} "
                  f"({_mib(report.bytes_before)})")]
        if report.images:
            lines.append(f"{verb} {_n(report.images, 'image')} only those calls sent")
        if report.running:
            lines.append(f"kept {_n(report.running, 'run')} still running (a running run is never pruned)")
        if "vacuum" in doc:
            lines.append(f"vacuumed: {_mib(doc['vacuum']['bytes_before'])} -> {_mib(doc['vacuum']['bytes_after'])}")
        elif report.runs and not dry_run:
            lines.append("the file keeps its size until vacuumed: veriscale runs vacuum")
        for line in lines:
            console.print(for_terminal(line), highlight=False, soft_wrap=True)


@runs_app.command("vacuum")
def vacuum_store(store: o.StoreOpt = None, json_out: o.JsonOpt = False) -> None:
    """Rewrite the store file without the free space pruned runs and calls left (SQLite VACUUM); prints
    its size before and after. Example: veriscale runs vacuum"""
    from veriscale.engine.store_upkeep import vacuum

    with user_errors():
        st = o.open_store(store)
        report = vacuum(st)
        if json_out:
            emit_json(report.to_dict(), "runs-vacuum")
            return
        console.print(for_terminal(f"vacuumed {st.path}: {_mib(report.bytes_before)} -> {_mib(report.bytes_after)}"),
                      highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.add_typer(runs_app, name="runs")
