"""Bench generated criteria against packs: ``--criteria general,auto`` judges the same items under each
choice, one row per choice and configuration (its label starts ``criteria=NAME``).

    choices = criteria_choices("general,auto:2")          # ["general", "auto:2"]
    rows = run_choices(bench, plan_kind, items, configs, choices)

A pack runs as an ordinary bench (the same rows, the Ray executor if one is set). ``auto`` writes
the criteria of each item's task with the bench's model first (one cached chat call a task, through
the bench's store: :mod:`veriscale.verify.criteria_auto`), then judges that item under them, here.
A task whose generated criteria are unusable counts as a failed item, never as a guess.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Callable, Sequence

import numpy as np

from veriscale.bench.bench_report import BenchRow
from veriscale.bench.configs import BenchConfig
from veriscale.bench.metrics import PairOutcome, PoolOutcome, pairwise_metrics, pool_metrics
from veriscale.engine.sync_facade import CallExecutor
from veriscale.engine.usage import Usage
from veriscale.errors import UserError
from veriscale.selection.select import SelectionFailed, run_selection
from veriscale.verify.criteria import CriteriaSet, load_criteria
from veriscale.verify.criteria_auto import auto_count, generate_criteria, references_in

Progress = Callable[[int, int], None]


def criteria_choices(spec: str) -> list[str]:
    """The criteria choices of a comma list (one choice: a list of one)."""
    return [s.strip() for s in spec.split(",") if s.strip()] or [spec]


def run_choices(bench: Any, kind: str, items: Sequence[Any], configs: Sequence[BenchConfig], choices: list[str],
                on_progress: Progress | None = None) -> list[BenchRow]:
    """One :class:`BenchRow` per choice and configuration, the choices in order."""
    from veriscale.bench.bench_runner import Bench

    total, done = len(items) * len(configs) * len(choices), 0

    def tick(_done: int = 0, _total: int = 0) -> None:
        nonlocal done
        done += 1
        if on_progress:
            on_progress(done, total)

    rows: list[BenchRow] = []
    for choice in choices:
        count = auto_count(choice)
        if count is None:
            sub = Bench(bench.model, bench.store, replace(bench.settings, criteria=load_criteria(choice)),
                        max_calls=bench.max_calls, concurrency=bench.concurrency, executor=bench.executor)
            plan = sub.plan_pairs(items, configs) if kind == "pairs" else sub.plan_pools(items, configs)
            found = sub.run(plan, on_progress=tick)
            bench.notes += sub.notes
        else:
            found = _auto_rows(bench, kind, items, configs, count, tick)
        for row in found:
            bench.usage.add(row.usage)
        rows += [replace(row, label=f"criteria={choice} {row.label}") for row in found]
    return rows


def _auto_rows(bench: Any, kind: str, items: Sequence[Any], configs: Sequence[BenchConfig], count: int,
               tick: Callable[[], None]) -> list[BenchRow]:
    """Each item judged under criteria generated from its own task, for every configuration."""
    from veriscale.bench.bench_runner import Bench

    writer = CallExecutor(bench.model, bench.store, prompt_version="criteria-auto", max_calls=bench.max_calls)
    generated: list[CriteriaSet | None] = []
    for item in items:
        task = item.instruction if kind == "pairs" else item.task.text
        refs = [] if kind == "pairs" else references_in(item.task.metadata, task)
        try:
            generated.append(generate_criteria(writer, task, count=count, references=refs).criteria)
        except UserError as exc:
            bench.notes.append(f"criteria auto: item {_item_id(kind, item)} has no criteria ({exc}); it counts as failed")
            generated.append(None)
    bench.usage.add(writer.usage)
    rows = []
    for config in configs:
        started, usage = time.perf_counter(), Usage()
        pairs: list[PairOutcome] = []
        pools: list[PoolOutcome] = []
        failed = 0
        for position, (item, crits) in enumerate(zip(items, generated)):
            if crits is None:
                failed += 1
                if kind == "pools":
                    pools.append(_pool_outcome(bench, item, position, None))
                tick()
                continue
            sub = Bench(bench.model, bench.store, replace(bench.settings, criteria=crits), concurrency=bench.concurrency)
            plan = sub.plan_pairs([item], [config]) if kind == "pairs" else sub.plan_pools([item], [config])
            verifier = sub.verifier(plan.configs[0].settings)
            planned: Any = plan.configs[0].items[0]  # PairTexts for pairs, a SelectionPlan for pools
            if kind == "pairs":
                result = verifier.compare(planned.task_text, planned.first, planned.second)
                if result.failed or result.p_a_wins is None or result.reward_a is None or result.reward_b is None:
                    failed += 1
                else:
                    pairs.append(PairOutcome(result.reward_a, result.reward_b, result.p_a_wins, item.label))
            else:
                pools.append(_pool_outcome(bench, item, position, (planned, verifier)))
            usage.add(verifier.usage)
            tick()
        metrics = pairwise_metrics(pairs, failed=failed).to_dict() if kind == "pairs" else pool_metrics(pools).to_dict()
        rows.append(BenchRow(config, config.label(kind), metrics, usage, time.perf_counter() - started))
    return rows


def _pool_outcome(bench: Any, pool: Any, position: int, judged: tuple[Any, Any] | None) -> PoolOutcome:
    random_pick = int(np.random.default_rng([bench.settings.seed, position]).integers(len(pool.candidates)))
    selected, comparisons, confidence, calls, tokens = None, 0, None, 0, 0
    if judged is not None:
        plan, verifier = judged
        try:
            sel = run_selection(plan, verifier=verifier)
            selected, comparisons, confidence = sel.index, sel.n_comparisons, sel.confidence
        except SelectionFailed:
            pass
        calls, tokens = verifier.usage.model_calls, verifier.usage.prompt_tokens
    return PoolOutcome(pool.task_id, pool.labels, selected, random_pick, comparisons, calls, tokens, confidence)


def _item_id(kind: str, item: Any) -> str:
    return str(item.id if kind == "pairs" else item.task_id)
