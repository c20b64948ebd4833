"""Bench metrics: pairwise accuracy, tie rate, signal-to-noise; pass@1, oracle, random, selected.

Pairwise (labelled pairs, ``label`` 1 or 2 = which output is better)::

    m = pairwise_metrics([PairOutcome(0.8, 0.6, 0.88, 1), PairOutcome(0.5, 0.5, 0.5, 2)])
    m.accuracy, m.tie_rate, m.snr

- *margin*: the reward gap toward the correct output, ``R_correct − R_wrong`` (reward scale
  [0, 1], so it does not depend on the preference temperature tau).
- *tie*: ``|P(first wins) − 0.5| < 0.01`` or exactly equal rewards. A tie earns half credit in
  ``accuracy`` (what a coin flip would earn) and none in ``strict_accuracy``.
- *SNR* (signal-to-noise ratio): mean margin divided by the standard deviation of the margin
  over the pairs (population std). Above 0 the verifier leans the right way on average; the
  larger, the more reliably. None when fewer than 2 pairs or the margins do not vary.

Pools (several labelled runs per task)::

    m = pool_metrics([PoolOutcome("t1", [1, 0, 0], selected=0, random_pick=2)])
    m.pass_at_1, m.oracle, m.random_pick, m.selected

- *pass@1*: per task the mean label of its runs, then the mean over tasks (the expected score
  of one run). *oracle pass@N*: per task the best label. *random pick*: the label of one run
  drawn uniformly per task with the bench seed (a realised baseline, same variance as a
  selector). *selected*: the label of the verifier's pick. Labels are rewards in [0, 1]
  (1/0 for pass/fail).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Sequence

from veriscale.errors import UserError

TIE_WITHIN = 0.01


@dataclass(frozen=True)
class PairOutcome:
    """One judged labelled pair: both rewards, P(first wins), and which output is better."""

    reward_first: float
    reward_second: float
    p_first: float
    label: int  # 1: the first output is better, 2: the second

    def margin(self) -> float:
        """Reward gap toward the correct output."""
        gap = self.reward_first - self.reward_second
        return gap if self.label == 1 else -gap

    def is_tie(self, within: float = TIE_WITHIN) -> bool:
        return abs(self.p_first - 0.5) < within or self.reward_first == self.reward_second


@dataclass(frozen=True)
class PairwiseMetrics:
    n: int
    accuracy: float | None
    strict_accuracy: float | None
    tie_rate: float | None
    mean_margin: float | None
    std_margin: float | None
    snr: float | None
    failed: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


def pairwise_metrics(outcomes: Sequence[PairOutcome], *, failed: int = 0, tie_within: float = TIE_WITHIN) -> PairwiseMetrics:
    """Accuracy (ties half), strict accuracy, tie rate and SNR over judged pairs."""
    for o in outcomes:
        if o.label not in (1, 2):
            raise UserError(f"pair label {o.label!r} is not 1 or 2: label says which output is better")
    n = len(outcomes)
    if n == 0:
        return PairwiseMetrics(0, None, None, None, None, None, None, failed)
    ties = [o.is_tie(tie_within) for o in outcomes]
    wins = [not t and o.margin() > 0 for o, t in zip(outcomes, ties)]
    margins = [o.margin() for o in outcomes]
    mean = sum(margins) / n
    std = math.sqrt(sum((m - mean) ** 2 for m in margins) / n)
    snr = mean / std if n >= 2 and std > 1e-12 else None
    return PairwiseMetrics(
        n=n, accuracy=(sum(wins) + 0.5 * sum(ties)) / n, strict_accuracy=sum(wins) / n,
        tie_rate=sum(ties) / n, mean_margin=mean, std_margin=std, snr=snr, failed=failed,
    )


@dataclass(frozen=True)
class PoolOutcome:
    """One task's pool: the runs' labels, the verifier's pick and a seeded random pick."""

    task_id: str
    labels: Sequence[float]
    selected: int | None  # None: the selection failed
    random_pick: int
    comparisons: int = 0
    model_calls: int = 0
    prompt_tokens: int = 0
    confidence: float | None = None


@dataclass(frozen=True)
class PoolMetrics:
    n_tasks: int
    pass_at_1: float | None
    oracle: float | None
    random_pick: float | None
    selected: float | None
    comparisons: int
    model_calls: int
    prompt_tokens: int
    failed: int = 0
    per_task: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def pool_metrics(outcomes: Sequence[PoolOutcome]) -> PoolMetrics:
    """Mean over tasks whose selection finished; failed selections are counted, not scored."""
    done = [o for o in outcomes if o.selected is not None]
    for o in outcomes:
        if not o.labels:
            raise UserError(f"task {o.task_id!r} has no labelled runs: every run in a bench pool needs a label")
    per_task = [
        {"task": o.task_id, "labels": list(o.labels), "selected": o.selected, "random_pick": o.random_pick,
         "selected_label": None if o.selected is None else o.labels[o.selected], "confidence": o.confidence,
         "comparisons": o.comparisons, "model_calls": o.model_calls}
        for o in outcomes
    ]
    totals = dict(comparisons=sum(o.comparisons for o in outcomes), model_calls=sum(o.model_calls for o in outcomes),
                  prompt_tokens=sum(o.prompt_tokens for o in outcomes))
    if not done:
        return PoolMetrics(0, None, None, None, None, failed=len(outcomes), per_task=per_task, **totals)

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    return PoolMetrics(
        n_tasks=len(done),
        pass_at_1=mean([mean([float(x) for x in o.labels]) for o in done]),
        oracle=mean([max(float(x) for x in o.labels) for o in done]),
        random_pick=mean([float(o.labels[o.random_pick]) for o in done]),
        selected=mean([float(o.labels[o.selected]) for o in done]),
        failed=len(outcomes) - len(done), per_task=per_task, **totals,
    )
