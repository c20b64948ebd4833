"""Run bench configurations on labelled pairs or pools, sharing one store (so reruns resume).

    bench = Bench(load_backend("embedded"), Store.open(), criteria="general")
    configs = expand_configs(BenchConfig(), parse_sweeps(["g=2,5,20"]), discrete_vs_continuous=True)
    bench.estimate_pairs(pairs, configs)          # Estimate: new calls, cached, prompt tokens
    rows = bench.run_pairs(pairs, configs)        # one BenchRow per config

A config sets the scale granularity ``g`` (letters:G), the number of criteria ``c`` (the first
c of the set), ``repeats`` (pairs: K judgements per pair, 2 = both slot orders; pools:
judgements per comparison), the PPT pivots ``k`` (pools only) and discrete vs continuous
judging. Discrete judging reads the argmax label of the very distributions continuous judging
averages, so the two share every model call through the store: the second costs nothing.
Every call is cached in the store, so an interrupted bench resumes where it stopped.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Sequence

import numpy as np

from veriscale.bench.datasets import LabelledPair, LabelledPool
from veriscale.bench.metrics import PairOutcome, PoolOutcome, pairwise_metrics, pool_metrics
from veriscale.data.model import Candidate, Task
from veriscale.data.render import render_candidate
from veriscale.engine.executor import Usage
from veriscale.engine.store import Store
from veriscale.errors import UserError
from veriscale.models.base import ModelBackend
from veriscale.selection.select import SelectionFailed, fit_prompt, plan_selection, select
from veriscale.verify.criteria import CriteriaSet, load_criteria
from veriscale.verify.reward import Verifier

SWEEP_AXES = ("g", "k", "c", "repeats")
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class BenchConfig:
    """One setting to measure; ``scale`` is used when ``g`` is None."""

    scale: str = "letters"
    g: int | None = None
    c: int | None = None
    repeats: int | None = None
    k: int = 2
    discrete: bool = False

    def scale_spec(self) -> str:
        return f"letters:{self.g}" if self.g is not None else self.scale

    def label(self, kind: str) -> str:
        parts = [f"G={self.g}" if self.g is not None else self.scale]
        if self.c is not None:
            parts.append(f"C={self.c}")
        if self.repeats is not None:
            parts.append(f"K={self.repeats}")
        if kind == "pools":
            parts.append(f"k={self.k}")
        parts.append("discrete" if self.discrete else "continuous")
        return " ".join(parts)


@dataclass
class BenchRow:
    config: BenchConfig
    label: str
    metrics: dict[str, Any]
    usage: Usage
    wall_s: float

    def to_dict(self) -> dict[str, Any]:
        return {"config": asdict(self.config), "label": self.label, "metrics": self.metrics,
                "usage": self.usage.to_dict(), "wall_s": round(self.wall_s, 3)}


@dataclass(frozen=True)
class BenchEstimate:
    """Model calls and prompt tokens before starting; ``upper_bound`` when not exact."""

    model_calls: int
    cached_calls: int
    prompt_tokens: int
    upper_bound: bool
    tokens_exact: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_sweeps(specs: Sequence[str]) -> dict[str, list[int]]:
    """``["g=2,5,20", "k=1,2"]`` -> ``{"g": [2, 5, 20], "k": [1, 2]}``; bad specs raise a UserError."""
    axes: dict[str, list[int]] = {}
    for spec in specs:
        name, sep, values = spec.partition("=")
        name = name.strip().lower()
        if not sep or name not in SWEEP_AXES:
            raise UserError(f"--sweep '{spec}' is not AXIS=V1,V2,...: use one of {', '.join(SWEEP_AXES)}, e.g. g=2,5,20")
        try:
            numbers = [int(v) for v in values.split(",") if v.strip()]
        except ValueError:
            raise UserError(f"--sweep '{spec}' has a value that is not a whole number: e.g. {name}=1,2,4") from None
        if not numbers or any(n < 1 for n in numbers):
            raise UserError(f"--sweep '{spec}' needs whole numbers >= 1, e.g. {name}=1,2,4")
        if name in axes:
            raise UserError(f"--sweep names '{name}' twice: give all its values in one --sweep")
        axes[name] = numbers
    return axes


def expand_configs(base: BenchConfig, sweeps: dict[str, list[int]], *, discrete_vs_continuous: bool = False
                   ) -> list[BenchConfig]:
    """Every combination of the sweep values over ``base`` (continuous before discrete)."""
    names = list(sweeps)
    configs = []
    for values in itertools.product(*(sweeps[n] for n in names)):
        config = replace(base, **dict(zip(names, values)))
        if discrete_vs_continuous:
            configs += [replace(config, discrete=False), replace(config, discrete=True)]
        else:
            configs.append(config)
    return configs


class Bench:
    """Runs configurations with one model and store; see the module docstring."""

    def __init__(self, model: ModelBackend, store: Store, *, criteria: CriteriaSet | str, reasoning: bool = False,
                 seed: int = 0, budget_tokens: int | None = None, method: str = "ppt", adaptive: bool = True,
                 max_calls: int | None = None, concurrency: int = 4) -> None:
        self.model = model
        self.store = store
        self.criteria = load_criteria(criteria) if isinstance(criteria, str) else criteria
        self.reasoning = reasoning
        self.seed = seed
        self.budget_tokens = budget_tokens
        self.method = method
        self.adaptive = adaptive
        self.max_calls = max_calls
        self.concurrency = concurrency
        self.usage = Usage()

    def verifier(self, config: BenchConfig, *, pairwise_repeats: bool) -> Verifier:
        crits = self.criteria
        if config.c is not None:
            if config.c > len(crits.items):
                raise UserError(f"c={config.c} criteria asked but set '{crits.name}' has {len(crits.items)}: "
                                f"sweep c up to {len(crits.items)}")
            crits = crits.only([c.name for c in crits.items[: config.c]])
        repeats = (config.repeats or 2) if pairwise_repeats else (config.repeats or 1)
        spent = self.usage.model_calls
        max_calls = None if self.max_calls is None else max(self.max_calls - spent, 0)
        return Verifier(self.model, store=self.store, scale=config.scale_spec(), criteria=crits, repeats=repeats,
                        reasoning=self.reasoning, discrete=config.discrete, seed=self.seed,
                        max_calls=max_calls, concurrency=self.concurrency)

    # -- labelled pairs --------------------------------------------------------------------
    def _pair_texts(self, verifier: Verifier, pair: LabelledPair) -> tuple[str, str, str]:
        fit = fit_prompt(verifier, Task(text=pair.instruction), self.budget_tokens, pairwise=True)
        count = verifier.model.count_tokens
        first = render_candidate(Candidate(id="1", text=pair.output_1), fit.budget_tokens, count)
        second = render_candidate(Candidate(id="2", text=pair.output_2), fit.budget_tokens, count)
        return fit.task_text, first, second

    def estimate_pairs(self, pairs: Sequence[LabelledPair], configs: Sequence[BenchConfig]) -> BenchEstimate:
        """Exact count of new calls (calls shared between configs counted once)."""
        planned = {}
        for config in configs:
            verifier = self.verifier(config, pairwise_repeats=True)
            for pair in pairs:
                calls, _ = verifier.plan_compare(*self._pair_texts(verifier, pair))
                for call in verifier.executor.keyed(calls):
                    planned.setdefault(call.key, call)
        if not planned:
            return BenchEstimate(0, 0, 0, False, True)
        probe = self.verifier(configs[0], pairwise_repeats=True)
        est = probe.executor.estimate(list(planned.values()))
        return BenchEstimate(est.calls, est.cached, est.prompt_tokens, False, est.token_count_exact)

    def run_pairs(self, pairs: Sequence[LabelledPair], configs: Sequence[BenchConfig],
                  on_progress: Progress | None = None) -> list[BenchRow]:
        rows, done, total = [], 0, len(pairs) * len(configs)
        for config in configs:
            verifier = self.verifier(config, pairwise_repeats=True)
            started = time.perf_counter()
            outcomes, failed = [], 0
            for pair in pairs:
                result = verifier.compare(*self._pair_texts(verifier, pair))
                if result.failed or result.p_a_wins is None:
                    failed += 1
                else:
                    outcomes.append(PairOutcome(result.reward_a, result.reward_b, result.p_a_wins, pair.label))
                done += 1
                if on_progress:
                    on_progress(done, total)
            self.usage.add(verifier.usage)
            metrics = pairwise_metrics(outcomes, failed=failed).to_dict()
            rows.append(BenchRow(config, config.label("pairs"), metrics, verifier.usage,
                                 time.perf_counter() - started))
        return rows

    # -- labelled pools ----------------------------------------------------------------------
    def estimate_pools(self, pools: Sequence[LabelledPool], configs: Sequence[BenchConfig]) -> BenchEstimate:
        """Upper bound: every selection's worst case, before the cache and prefix reuse."""
        calls = tokens = 0
        for config in configs:
            if config.discrete and replace(config, discrete=False) in configs:
                continue  # shares the continuous run's calls
            verifier = self.verifier(config, pairwise_repeats=False)
            for pool in pools:
                plan = plan_selection(pool.task, pool.candidates, verifier=verifier, method=self.method, k=config.k,
                                      adaptive=self.adaptive, budget_tokens=self.budget_tokens, repeats=config.repeats)
                calls += plan.model_calls_upper_bound
                tokens += plan.prompt_tokens_upper_bound
        return BenchEstimate(calls, 0, tokens, True, bool(getattr(self.model, "is_embedded", False)))

    def run_pools(self, pools: Sequence[LabelledPool], configs: Sequence[BenchConfig],
                  on_progress: Progress | None = None) -> list[BenchRow]:
        rows, done, total = [], 0, len(pools) * len(configs)
        for config in configs:
            verifier = self.verifier(config, pairwise_repeats=False)
            started = time.perf_counter()
            outcomes = []
            for position, pool in enumerate(pools):
                random_pick = int(np.random.default_rng([self.seed, position]).integers(len(pool.candidates)))
                before = verifier.usage.model_calls
                tokens_before = verifier.usage.prompt_tokens
                try:
                    sel = select(pool.task, pool.candidates, verifier=verifier, method=self.method, k=config.k,
                                 adaptive=self.adaptive, budget_tokens=self.budget_tokens, repeats=config.repeats,
                                 seed=self.seed)
                    selected, comparisons, confidence = sel.index, sel.n_comparisons, sel.confidence
                except SelectionFailed:
                    selected, comparisons, confidence = None, 0, None
                outcomes.append(PoolOutcome(pool.task_id, pool.labels, selected, random_pick, comparisons,
                                            verifier.usage.model_calls - before,
                                            verifier.usage.prompt_tokens - tokens_before, confidence))
                done += 1
                if on_progress:
                    on_progress(done, total)
            self.usage.add(verifier.usage)
            metrics = pool_metrics(outcomes).to_dict()
            rows.append(BenchRow(config, config.label("pools"), metrics, verifier.usage,
                                 time.perf_counter() - started))
        return rows


@dataclass
class BenchReport:
    """Everything one ``veriscale bench`` run measured (``to_dict`` is the ``--json`` shape)."""

    kind: str
    data: str
    model: str
    criteria: str
    limit: int | None
    seed: int
    items: list[str]
    estimate: BenchEstimate
    rows: list[BenchRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "data": self.data, "model": self.model, "criteria": self.criteria,
                "limit": self.limit, "seed": self.seed, "n_items": len(self.items), "items": self.items,
                "estimate": self.estimate.to_dict(), "rows": [r.to_dict() for r in self.rows], "notes": self.notes}
