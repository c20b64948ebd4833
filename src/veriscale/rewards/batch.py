"""One reward per (prompt, response) pair of a trainer's batch: the core every adapter calls.

    rewarder = BatchRewarder(Verifier(load_backend("embedded")))           # mode="group"
    batch = rewarder.rewards(["Q: 2+2?", "Q: 2+2?", "Q: 3+3?"], ["4", "5", "6"])
    batch.rewards      # [0.7, 0.3, 0.8]: the first two ranked against each other, None on failure
    batch.criteria     # [{"Correctness": 0.8, ...}, ...] per-criterion scores of each response
    batch.usage        # model calls, cache hits, tokens this batch cost
    await rewarder.arewards(prompts, responses)                            # from async code

``mode="group"`` (the default) rewards the responses to identical prompts against each other
(:mod:`veriscale.rewards.group`): an all-wrong group still ranks the less wrong higher.
``mode="pointwise"`` scores each response alone with the verifier's expected label value, in
[0, 1]; identical (prompt, response) pairs are scored once and share the reward. ``scheme``
(``"round_robin"`` or ``"sparse"``, :mod:`veriscale.rewards.group`) ranks the groups;
``batch.scheme`` and ``batch.metrics()["comparisons"]`` say what it used. Either way a response that is missing, empty or could not be verified gets None, and
``errors`` says why: a failed verification is never a score.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from veriscale.engine.usage import Usage
from veriscale.errors import UserError, setting
from veriscale.rewards.group import DEFAULT_GROUP_SCHEME, GROUP_SETTINGS, GroupRewarder, groups_by_prompt
from veriscale.selection.settings import SelectionSettings
from veriscale.verify.reward import Verifier

MODES = ("group", "pointwise")
NEUTRAL_REWARD = 0.5  # the middle of the reward range, for a group with nothing verified


@dataclass
class RewardBatch:
    """The rewards of a batch, in the order given, with what they rest on and what they cost."""

    rewards: list[float | None]
    group_sizes: list[int]
    criteria: list[dict[str, float | None]]
    errors: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    groups: list[int] = field(default_factory=list)        # each response's group, by first member
    unverified: list[bool] = field(default_factory=list)   # no reward of its own (None, or filled in)
    scheme: str = DEFAULT_GROUP_SCHEME                     # the group scheme that ranked the groups
    comparisons: int = 0                                   # pairwise comparisons judged, all groups

    def __post_init__(self) -> None:
        self.groups = self.groups or list(range(len(self.rewards)))
        self.unverified = self.unverified or [r is None for r in self.rewards]

    @property
    def failed(self) -> int:
        return sum(self.unverified)

    def neutral_filled(self) -> RewardBatch:
        """The batch with each missing reward (and criterion score) set to its group's mean of the
        verified ones, or 0.5 where none is verified: for trainers that cannot take None. In GRPO
        such a response has advantage 0 (no push either way); ``unverified`` still flags it."""
        def filled(values: list[float | None]) -> list[float]:
            out = []
            for i, value in enumerate(values):
                mates = [v for j, v in enumerate(values) if self.groups[j] == self.groups[i] and v is not None]
                out.append(value if value is not None else (sum(mates) / len(mates) if mates else NEUTRAL_REWARD))
            return out

        names = sorted({name for scores in self.criteria for name in scores}) or []
        columns = {name: filled([scores.get(name) for scores in self.criteria]) for name in names}
        criteria = [{name: columns[name][i] for name in names} for i in range(len(self.rewards))]
        return RewardBatch(filled(self.rewards), self.group_sizes, criteria, self.errors, self.usage, self.groups,
                           self.unverified, self.scheme, self.comparisons)

    def criterion_columns(self) -> dict[str, list[float | None]]:
        """Per-criterion scores as columns (one value per response, None where unscored)."""
        names = sorted({name for scores in self.criteria for name in scores})
        return {name: [scores.get(name) for scores in self.criteria] for name in names}

    def metrics(self) -> dict[str, float]:
        """What the batch cost, as scalars a trainer can log."""
        return {"model_calls": float(self.usage.model_calls), "cache_hits": float(self.usage.cache_hits),
                "prompt_tokens": float(self.usage.prompt_tokens), "failed": float(self.failed),
                "comparisons": float(self.comparisons)}

    def to_openrlhf(self) -> dict[str, Any]:
        """OpenRLHF's remote reward answer: ``rewards``, ``scores`` and ``extra_logs`` lists."""
        failed = [1.0 if bad else 0.0 for bad in self.unverified]
        logs = {"veriscale_group_size": [float(n) for n in self.group_sizes], "veriscale_failed": failed}
        for name, values in self.criterion_columns().items():
            logs[f"veriscale_{name}"] = values
        return {"rewards": self.rewards, "scores": self.rewards, "extra_logs": logs}


def check_pairs(prompts: Any, responses: Any) -> None:
    """UserError naming the list when prompts and responses are not equal-length lists."""
    for name, value in (("prompts", prompts), ("responses", responses)):
        if not isinstance(value, (list, tuple)):
            raise UserError(f"{name} must be a list, not {type(value).__name__}: give one item per completion")
    if len(prompts) != len(responses):
        raise UserError(f"{len(prompts)} prompts but {len(responses)} responses: give one prompt per response")
    bad = next((i for i, p in enumerate(prompts) if not isinstance(p, str)), None)
    if bad is not None:
        raise UserError(f"prompt {bad} is {type(prompts[bad]).__name__}, not text: give each prompt as a string")


class BatchRewarder:
    """Rewards for a batch of (prompt, response) pairs (see the module docstring)."""

    def __init__(self, verifier: Verifier, *, mode: str = "group",
                 settings: SelectionSettings = GROUP_SETTINGS, scheme: str = DEFAULT_GROUP_SCHEME) -> None:
        if mode not in MODES:
            raise UserError(f"reward {setting('mode', mode)} is unknown: use one of {', '.join(MODES)}")
        self.verifier, self.mode = verifier, mode
        self.grouper = GroupRewarder(verifier, settings, scheme=scheme)

    def rewards(self, prompts: Sequence[str], responses: Sequence[str | None]) -> RewardBatch:
        check_pairs(prompts, responses)
        n = len(prompts)
        batch = RewardBatch([None] * n, [0] * n, [{} for _ in range(n)], scheme=self.grouper.scheme)
        by_prompt = groups_by_prompt(list(prompts))
        for members in by_prompt:
            for i in members:
                batch.groups[i] = members[0]  # the prompt's group, also in pointwise mode (neutral fill)
        if self.mode == "pointwise":
            self._pointwise(prompts, responses, batch)
            return batch
        for members in by_prompt:
            result = self.grouper.group(prompts[members[0]], [responses[i] for i in members])
            batch.errors += [f"prompt {members[0]}: {e}" for e in result.errors]
            batch.usage.add(result.usage)
            batch.comparisons += result.comparisons
            for local, i in enumerate(members):
                batch.rewards[i], batch.criteria[i] = result.rewards[local], result.criteria[local]
                batch.unverified[i] = result.rewards[local] is None
                batch.group_sizes[i] = len(members)
        return batch

    def _pointwise(self, prompts: Sequence[str], responses: Sequence[str | None], batch: RewardBatch) -> None:
        """Each distinct (prompt, response) scored once (a group of one is scored pointwise); its
        duplicates get the same reward and criteria without a model call."""
        first: dict[tuple[str, Any], int] = {}
        for i, (prompt, response) in enumerate(zip(prompts, responses)):
            key = (prompt, response if isinstance(response, str) else None)
            if key in first:
                j = first[key]
                batch.rewards[i], batch.criteria[i] = batch.rewards[j], dict(batch.criteria[j])
                batch.unverified[i], batch.group_sizes[i] = batch.unverified[j], 1
                continue
            first[key] = i
            result = self.grouper.group(prompt, [response])
            batch.errors += [f"prompt {i}: {e}" for e in result.errors]
            batch.usage.add(result.usage)
            batch.rewards[i], batch.criteria[i] = result.rewards[0], result.criteria[0]
            batch.unverified[i], batch.group_sizes[i] = result.rewards[0] is None, 1

    async def arewards(self, prompts: Sequence[str], responses: Sequence[str | None]) -> RewardBatch:
        """:meth:`rewards` without blocking the caller's loop; model calls still go through the gateway."""
        return await asyncio.to_thread(self.rewards, prompts, responses)
