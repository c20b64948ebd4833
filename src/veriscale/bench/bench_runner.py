"""Run bench configurations on labelled pairs or pools, sharing one store (so reruns resume).

    bench = Bench(load_backend("embedded"), Store.open(), SelectionSettings(criteria="general"))
    configs = expand_configs(BenchConfig(), parse_sweeps(["g=2,5,20"]), discrete_vs_continuous=True)
    plan = bench.plan_pairs(pairs, configs)       # every output rendered once, before any call
    bench.estimate(plan)                          # BenchEstimate: new calls, cached, prompt tokens
    rows = bench.run(plan)                        # one BenchRow per config

``Bench(..., executor=RayExecutor())`` runs each configuration's items as Ray units
(:mod:`veriscale.many.units`), their calls committed to this store as they land: the same rows as
here. Configurations are in ``veriscale.bench.configs``. Discrete judging reads the argmax label of
the very distributions continuous judging averages, so the two share every model call through
the store (the second costs nothing) and share one plan. Every call is cached in the store,
so an interrupted bench resumes where it stopped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import numpy as np

from veriscale.bench.configs import SWEEP_AXES, BenchConfig, expand_configs, parse_sweeps
from veriscale.bench.datasets import LabelledPair, LabelledPool
from veriscale.bench.metrics import PairOutcome, PoolOutcome, pairwise_metrics, pool_metrics
from veriscale.bench.bench_report import BenchEstimate, BenchReport, BenchRow
from veriscale.data.model import Candidate, Task
from veriscale.engine.sync_facade import Usage
from veriscale.engine.store import Store
from veriscale.models.base import ModelBackend
from veriscale.models.context import ContextOverflow, learned_context, refit_note
from veriscale.selection.plan import SelectionPlan, plan_selection
from veriscale.selection.prompt_fit import fit_prompt
from veriscale.selection.rendering import Renderer
from veriscale.selection.select import SelectionFailed, run_selection
from veriscale.selection.settings import SelectionSettings
from veriscale.verify.reward import Verifier

__all__ = ["SWEEP_AXES", "Bench", "BenchConfig", "BenchEstimate", "BenchPlan", "BenchReport", "BenchRow",
           "ConfigPlan", "PairTexts", "expand_configs", "parse_sweeps"]

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class PairTexts:
    """A labelled pair as the judge reads it: the task and both outputs, rendered."""

    task_text: str
    first: str
    second: str


@dataclass(frozen=True)
class ConfigPlan:
    """One configuration, planned: its settings and one plan per item (``PairTexts`` or ``SelectionPlan``).

    ``shares_calls``: the discrete twin of a continuous configuration in the same plan, whose
    model calls are all that one's.
    """

    config: BenchConfig
    settings: SelectionSettings
    items: tuple[PairTexts, ...] | tuple[SelectionPlan, ...]
    shares_calls: bool = False


@dataclass(frozen=True)
class BenchPlan:
    """Every configuration planned over the same labelled pairs or pools."""

    kind: str  # "pairs" or "pools"
    items: tuple[LabelledPair, ...] | tuple[LabelledPool, ...]
    configs: tuple[ConfigPlan, ...]


class Bench:
    """Plans and runs configurations with one model and store; see the module docstring.

    ``settings`` (or ``SelectionSettings`` fields as keywords) is the base each configuration
    applies over; ``max_calls`` caps new model calls over the whole bench.
    """

    def __init__(self, model: ModelBackend, store: Store, settings: SelectionSettings | None = None, *,
                 max_calls: int | None = None, concurrency: int = 4, executor: Any = None,
                 **overrides: Any) -> None:
        self.model = model
        self.executor = executor  # a RayExecutor: items as Ray units (None: here)
        self.store = store
        self.settings = replace(settings or SelectionSettings(), **overrides)
        self.max_calls = max_calls
        self.concurrency = concurrency
        self.usage = Usage()
        self.notes: list[str] = []  # what a run changed on the way (a refit to the model's context)
        self.renderer = Renderer.for_model(model)  # calls are linked to the current run (engine.run_scope)

    def verifier(self, settings: SelectionSettings) -> Verifier:
        """A verifier for one configuration, with what is left of ``max_calls``."""
        spent = self.usage.model_calls
        max_calls = None if self.max_calls is None else max(self.max_calls - spent, 0)
        return settings.verifier(self.model, store=self.store, max_calls=max_calls, concurrency=self.concurrency)

    # -- planning ----------------------------------------------------------------------------
    def plan_pairs(self, pairs: Sequence[LabelledPair], configs: Sequence[BenchConfig]) -> BenchPlan:
        """Fit and render every pair for every configuration (each output rendered once per budget)."""
        outputs = [(Candidate(id="1", text=p.output_1), Candidate(id="2", text=p.output_2)) for p in pairs]

        def texts(settings: SelectionSettings) -> tuple[PairTexts, ...]:
            verifier = settings.verifier(self.model)
            planned = []
            for pair, (first, second) in zip(pairs, outputs):
                fit = fit_prompt(verifier, Task(text=pair.instruction), settings.budget_tokens, pairwise=True,
                                 renderer=self.renderer)
                planned.append(PairTexts(fit.task_text, self.renderer.candidate(first, fit.budget_tokens),
                                         self.renderer.candidate(second, fit.budget_tokens)))
            return tuple(planned)

        return BenchPlan("pairs", tuple(pairs), self._plan_configs(configs, texts))

    def plan_pools(self, pools: Sequence[LabelledPool], configs: Sequence[BenchConfig]) -> BenchPlan:
        """Plan every pool's selection for every configuration."""

        def selections(settings: SelectionSettings) -> tuple[SelectionPlan, ...]:
            verifier = settings.verifier(self.model)
            return tuple(plan_selection(pool.task, pool.candidates, verifier=verifier, settings=settings,
                                        renderer=self.renderer) for pool in pools)

        return BenchPlan("pools", tuple(pools), self._plan_configs(configs, selections))

    def _plan_configs(self, configs: Sequence[BenchConfig], plan_items: Callable[[SelectionSettings], tuple]
                      ) -> tuple[ConfigPlan, ...]:
        """One ``ConfigPlan`` per config; a discrete twin reuses its continuous config's items."""
        planned: dict[BenchConfig, ConfigPlan] = {}
        for config in configs:
            settings = config.settings(self.settings)
            twin = planned.get(replace(config, discrete=False)) if config.discrete else None
            if twin is not None:
                items = tuple(replace(p, settings=settings) if isinstance(p, SelectionPlan) else p for p in twin.items)
                planned[config] = ConfigPlan(config, settings, items, shares_calls=True)
            else:
                planned[config] = ConfigPlan(config, settings, plan_items(settings))
        return tuple(planned[config] for config in configs)

    def estimate(self, plan: BenchPlan) -> BenchEstimate:
        """Pairs: the exact count of new calls (calls shared between configs counted once).
        Pools: an upper bound, every selection's worst case before the cache and prefix reuse."""
        if plan.kind == "pools":
            counted = [p for cp in plan.configs if not cp.shares_calls for p in cp.items]
            return BenchEstimate(sum(p.model_calls_upper_bound for p in counted),
                                 0, sum(p.prompt_tokens_upper_bound for p in counted), True,
                                 bool(getattr(self.model, "is_embedded", False)))
        calls = {}
        for cp in plan.configs:
            verifier = cp.settings.verifier(self.model, store=self.store)
            for texts in cp.items:
                planned, _ = verifier.plan_compare(texts.task_text, texts.first, texts.second)
                for call in verifier.executor.keyed(planned):
                    calls.setdefault(call.key, call)
        if not calls:
            return BenchEstimate(0, 0, 0, False, True)
        probe = plan.configs[0].settings.verifier(self.model, store=self.store)
        est = probe.executor.estimate(list(calls.values()))
        return BenchEstimate(est.calls, est.cached, est.prompt_tokens, False, est.token_count_exact)

    # -- running -----------------------------------------------------------------------------
    def run(self, plan: BenchPlan, on_progress: Progress | None = None) -> list[BenchRow]:
        """Run every configuration of ``plan``; ``on_progress(done, total)`` after each item. A prompt
        too long for the context a reply names replans the bench once (see ``notes``)."""
        try:
            return self._run(plan, on_progress)
        except ContextOverflow as overflow:
            context = learned_context(overflow, self.model)
            if context is None:
                raise
        configs = [cp.config for cp in plan.configs]
        plan = self.plan_pairs(plan.items, configs) if plan.kind == "pairs" else self.plan_pools(plan.items, configs)
        self.notes.append(refit_note(context, "every render budget"))
        return self._run(plan, on_progress)

    def _run(self, plan: BenchPlan, on_progress: Progress | None) -> list[BenchRow]:
        if self.executor is not None:
            from veriscale.engine import sync_edge

            return sync_edge.run(self._arun_units(plan, on_progress))
        run_items = self._run_pairs if plan.kind == "pairs" else self._run_pools
        rows, done, total = [], 0, len(plan.items) * len(plan.configs)

        def tick() -> None:
            nonlocal done
            done += 1
            if on_progress:
                on_progress(done, total)

        for cp in plan.configs:
            verifier = self.verifier(cp.settings)
            started = time.perf_counter()
            metrics = run_items(verifier, plan.items, cp.items, tick)
            self.usage.add(verifier.usage)
            rows.append(BenchRow(cp.config, cp.config.label(plan.kind), metrics, verifier.usage,
                                 time.perf_counter() - started))
        return rows

    async def _arun_units(self, plan: BenchPlan, on_progress: Progress | None) -> list[BenchRow]:
        """:meth:`_run` with every item of a configuration a unit on ``self.executor`` (configurations
        one after another, so a discrete twin is seeded with its continuous configuration's calls)."""
        from veriscale.engine.run_scope import current_run_id
        from veriscale.many.units import Unit, chain_shared, run_units, verifier_recipe

        rows, done, total = [], 0, len(plan.items) * len(plan.configs)
        index_of = {cp.config: i for i, cp in enumerate(plan.configs)}

        def tick(_index: int, _result: Any) -> None:
            nonlocal done
            done += 1
            if on_progress:
                on_progress(done, total)

        for ci, cp in enumerate(plan.configs):
            verifier = self.verifier(cp.settings)  # the driver's side: model, gateway and store the units share
            twin = index_of.get(replace(cp.config, discrete=False)) if cp.shares_calls else None
            units = []
            for i, (item, planned) in enumerate(zip(plan.items, cp.items)):
                if plan.kind == "pairs":
                    assert isinstance(planned, PairTexts)
                    calls, _ = verifier.plan_compare(planned.task_text, planned.first, planned.second)
                    work: Any = _pair_work
                    spec: Any = (item, planned)
                    keys = tuple(str(c.key) for c in verifier.executor.keyed(calls))
                else:
                    pick = int(np.random.default_rng([self.settings.seed, i]).integers(len(item.candidates)))
                    work, spec, keys = _pool_work, (item, planned, pick), ()
                units.append(Unit(key=f"bench:{ci}:{i}", work=work, spec=spec, judge=verifier_recipe(cp.settings),
                                  command="bench", args={"config": cp.config.label(plan.kind), "item": i},
                                  seed_keys=keys, seed_from=(f"bench:{twin}:{i}",) if twin is not None else ()))
            left = None if self.max_calls is None else max(self.max_calls - self.usage.model_calls, 0)
            started = time.perf_counter()
            results = await run_units(self.executor, chain_shared(units), source=verifier, run_id=current_run_id(),
                                      at_once=len(units), on_done=tick, max_calls=left,
                                      calls_of=lambda result: int(result[1].model_calls))
            usage = Usage()
            for _, spent in results:
                usage.add(spent)
            self.usage.add(usage)
            outcomes = [outcome for outcome, _ in results]
            if plan.kind == "pairs":
                found = [o for o in outcomes if o is not None]
                metrics = pairwise_metrics(found, failed=len(outcomes) - len(found)).to_dict()
            else:
                metrics = pool_metrics(outcomes).to_dict()
            rows.append(BenchRow(cp.config, cp.config.label(plan.kind), metrics, usage, time.perf_counter() - started))
        return rows

    def run_pairs(self, pairs: Sequence[LabelledPair], configs: Sequence[BenchConfig],
                  on_progress: Progress | None = None) -> list[BenchRow]:
        """``run(plan_pairs(pairs, configs))``."""
        return self.run(self.plan_pairs(pairs, configs), on_progress)

    def run_pools(self, pools: Sequence[LabelledPool], configs: Sequence[BenchConfig],
                  on_progress: Progress | None = None) -> list[BenchRow]:
        """``run(plan_pools(pools, configs))``."""
        return self.run(self.plan_pools(pools, configs), on_progress)

    def _run_pairs(self, verifier: Verifier, pairs: Sequence[LabelledPair], planned: Sequence[PairTexts],
                   tick: Callable[[], None]) -> dict[str, Any]:
        outcomes, failed = [], 0
        for pair, texts in zip(pairs, planned):
            result = verifier.compare(texts.task_text, texts.first, texts.second)
            if result.failed or result.p_a_wins is None:
                failed += 1
            else:
                outcomes.append(PairOutcome(result.reward_a, result.reward_b, result.p_a_wins, pair.label))
            tick()
        return pairwise_metrics(outcomes, failed=failed).to_dict()

    def _run_pools(self, verifier: Verifier, pools: Sequence[LabelledPool], planned: Sequence[SelectionPlan],
                   tick: Callable[[], None]) -> dict[str, Any]:
        outcomes = []
        for position, (pool, plan) in enumerate(zip(pools, planned)):
            random_pick = int(np.random.default_rng([self.settings.seed, position]).integers(len(pool.candidates)))
            before = verifier.usage.copy()
            try:
                sel = run_selection(plan, verifier=verifier)
                selected, comparisons, confidence = sel.index, sel.n_comparisons, sel.confidence
            except SelectionFailed:
                selected, comparisons, confidence = None, 0, None
            spent = verifier.usage.since(before)
            outcomes.append(PoolOutcome(pool.task_id, pool.labels, selected, random_pick, comparisons,
                                        spent.model_calls, spent.prompt_tokens, confidence))
            tick()
        return pool_metrics(outcomes).to_dict()


def _spent(verifier: Verifier) -> Usage:
    return Usage(**verifier.usage.counters())


async def _pair_work(verifier: Verifier, spec: tuple[LabelledPair, PairTexts],
                     on_call: Callable[[Any], None]) -> tuple[PairOutcome | None, Usage]:
    """One labelled pair judged on a worker (a unit's work: :mod:`veriscale.many.units`)."""
    pair, texts = spec
    result = await verifier.acompare(texts.task_text, texts.first, texts.second, progress=on_call)
    if result.failed or result.p_a_wins is None:
        return None, _spent(verifier)
    return PairOutcome(result.reward_a, result.reward_b, result.p_a_wins, pair.label), _spent(verifier)


async def _pool_work(verifier: Verifier, spec: tuple[LabelledPool, SelectionPlan, int],
                     on_call: Callable[[Any], None]) -> tuple[PoolOutcome, Usage]:
    """One labelled pool's selection on a worker (a unit's work: :mod:`veriscale.many.units`)."""
    from veriscale.selection.select import arun_selection

    pool, plan, random_pick = spec
    try:
        sel = await arun_selection(plan, verifier=verifier, on_progress=lambda done, planned: on_call(None))
        selected, comparisons, confidence = sel.index, sel.n_comparisons, sel.confidence
    except SelectionFailed:
        selected, comparisons, confidence = None, 0, None
    spent = _spent(verifier)
    return PoolOutcome(pool.task_id, pool.labels, selected, random_pick, comparisons, spent.model_calls,
                       spent.prompt_tokens, confidence), spent
