"""``veriscale select-many``: one Best-of-N decision per task of a pool, written to picks.jsonl.

    veriscale select-many trials.jsonl.gz -o picks.jsonl
    veriscale select-many runs/ -o picks.jsonl --limit 20 --tasks-at-once 4 --model http://127.0.0.1:8000/v1#judge
    veriscale select-many trials.jsonl.gz -o picks.jsonl --tasks fix-git,merge-diff   # only these tasks
    veriscale select-many trials.jsonl.gz -o picks.jsonl --executor ray --address 10.0.0.5:6379
    veriscale select-many trials.jsonl.gz -o picks.jsonl --model http://10.0.0.7:8000/v1 --batch  # Batch API

A rerun with the same ``-o`` skips the tasks already decided and asks again those that failed.
Exit codes: 0 every task decided, 2 bad input, 3 some task had no pick (its line says why; a rerun
resumes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from veriscale.cli import options as o
from veriscale.cli.common import console, emit_json, fail, note, user_errors
from veriscale.cli.select import (AdaptiveOpt, BudgetOpt, DecisionBudgetOpt, FormatOpt,
                                  MethodOpt, MinConfOpt, PivotsOpt, SelectCriteriaOpt, SelectRepeatsOpt,
                                  SelectSeedOpt)
from veriscale.engine.run_scope import recorded_run
from veriscale.errors import UserError
from veriscale.selection.settings import SelectionSettings

FAILED_EXIT = 3

PoolsArg = Annotated[list[str], typer.Argument(help="Pools: JSONL files (.gz too), folders or globs of runs that "
                                                    "carry their task.", show_default=False)]
OutOpt = Annotated[Path, typer.Option("--out", "-o", help="picks.jsonl to write (an existing one is resumed).")]
LimitOpt = Annotated[Optional[int], typer.Option("--limit", help="Decide at most the first N tasks of the pool.")]
TasksOpt = Annotated[Optional[list[str]], typer.Option(
    "--tasks", help="Only these task ids (comma-separated or repeated).")]
BatchOpt = Annotated[bool, typer.Option(
    "--batch", help="Send the model calls as OpenAI Batch API batches (/v1/batches), in waves; a rerun polls the "
                    "batches a stopped run left (pip install 'veriscale\\[batch]').")]
AtOnceOpt = Annotated[Optional[int], typer.Option(
    "--tasks-at-once", help="Tasks decided at once (default: 1 on the embedded model, 4 on servers).")]


def register(app: typer.Typer) -> None:
    @app.command("select-many")
    def select_many_command(
        pools: PoolsArg, out: OutOpt,
        limit: LimitOpt = None, tasks: TasksOpt = None, tasks_at_once: AtOnceOpt = None,
        executor: o.ExecutorOpt = "local", address: o.AddressOpt = None, batch: BatchOpt = False,
        method: MethodOpt = "ppt", pivots: PivotsOpt = 2, budget_tokens: BudgetOpt = None,
        budget: DecisionBudgetOpt = None, min_confidence: MinConfOpt = None, adaptive: AdaptiveOpt = True,
        model: o.ModelOpt = None, store: o.StoreOpt = None, scale: o.ScaleOpt = "letters",
        criteria: SelectCriteriaOpt = None, repeats: SelectRepeatsOpt = None, reasoning: o.ReasoningOpt = False,
        discrete: o.DiscreteOpt = False, seed: SelectSeedOpt = 0, refresh: o.RefreshOpt = False,
        json_out: o.JsonOpt = False, max_calls: o.MaxCallsOpt = None, concurrency: o.ConcurrencyOpt = None,
        fmt: FormatOpt = None,
    ) -> None:
        """Pick the best run of every task in a pool; one line per task in picks.jsonl.

        A rerun with the same -o skips decided tasks. Exit 3 when some task has no pick.

        Example: veriscale select-many examples/terminal_bench/merge-diff-arc-agi-task.jsonl -o picks.jsonl
        """
        with user_errors():
            from veriscale.data.pool import load_pool
            from veriscale.many.picks_file import PicksFile
            from veriscale.many.select_many import default_at_once, jobs_of, select_many
            from veriscale.selection.inputs import default_criteria
            from veriscale.verify.criteria import load_criteria

            if min_confidence is not None and not 0.0 < min_confidence <= 1.0:
                raise UserError(f"--min-confidence {min_confidence} is out of range: give a number in (0, 1], e.g. 0.9")
            if out.exists() and out.is_dir():
                raise UserError(f"-o '{out}' is a folder: give a file path for the picks, e.g. {out / 'picks.jsonl'}")
            from veriscale.many.executors import LocalExecutor

            if batch and executor != "local":
                raise UserError("--batch sends the calls of decisions run in this process: drop --executor ray, "
                                "or drop --batch")
            runner = o.ray_executor(executor, address) or LocalExecutor()  # checked; a cluster joined before any work
            wanted = [t.strip() for given in tasks or [] for t in given.split(",") if t.strip()]
            pool = load_pool(pools, fmt)
            jobs = jobs_of(pool, tasks=wanted or None, limit=limit)
            every_run = [c for job in jobs for c in job.candidates]
            crits = load_criteria(criteria or default_criteria(every_run))
            from veriscale.many.batch import BATCH_CONCURRENCY, select_many_batched
            from veriscale.many.batch_ledger import out_ledger
            from veriscale.many.batch_client import check_batch_api
            from veriscale.models.vision_probe import require_seen
            from veriscale.selection.inputs import shows_images

            # with --batch the endpoint's slots are calls waiting in batches: many, unless --concurrency says
            cs = o.command_settings(model, store, concurrency or (BATCH_CONCURRENCY if batch else None))
            settings = SelectionSettings.from_flags(
                cs, criteria=crits, budget=budget, method=method, k=pivots, repeats=repeats, adaptive=adaptive,
                min_confidence=min_confidence, budget_tokens=budget_tokens, seed=seed, scale=scale,
                reasoning=reasoning, discrete=discrete)
            backend = o.open_model(cs)
            if batch:
                check_batch_api(backend)  # not HTTP, or no Batch API there: one sentence before any work
            verifier = settings.verifier(backend, store=o.open_store(cs), refresh=refresh,
                                         max_calls=max_calls, concurrency=cs.concurrency)
            if any(shows_images(job.task, job.candidates) for job in jobs):
                require_seen(verifier.executor)  # a model that does not see the frames: one sentence, no verdict
            at_once = tasks_at_once or default_at_once(verifier.model, executor=executor, batch=batch, tasks=len(jobs))
            picks = PicksFile(out)
            with recorded_run(verifier.executor.store, "select-many", verifier.model.uri, {
                    "pools": pools, "out": str(out), "tasks": len(jobs), "method": method, "k": pivots,
                    "criteria": crits.name, "tasks_at_once": at_once, "executor": executor,
                    "batch": batch}) as run:
                with o.call_progress(len(jobs), "tasks", not json_out, what="select-many", unit="tasks") as advance:
                    common = dict(verifier=verifier, settings=settings, picks=picks, at_once=at_once, parent=run.id,
                                  on_done=lambda record: advance())
                    report = (select_many_batched(jobs, ledger=out_ledger(out), whole_pool=not wanted and limit is None,
                                                  **common) if batch else
                              select_many(jobs, executor=runner, **common))
                payload = report.to_dict()
                run.finish("ok" if not report.failed else "failed", payload)
            payload.update(out=str(out), run_id=run.id)
            if json_out:
                emit_json(payload, "select-many")
            else:
                skipped = f", {len(report.skipped)} decided before" if report.skipped else ""
                console.print(f"decided {report.decided} of {len(jobs)} task(s){skipped}; "
                              f"{payload['model_calls']} model calls, {payload['cache_hits']} cache hits; "
                              f"picks in {out}", highlight=False, soft_wrap=True)
            for text in report.notes:
                note(text)
            if report.failed:
                first = next(r for r in report.records if r.error is not None)
                fail(f"{report.failed} task(s) have no pick (the first, {first.task}: {first.error}); their lines in "
                     f"'{out}' say why, and a rerun with the same -o decides them again", FAILED_EXIT)
