"""Rewards for a batch of (prompt, query) pairs, the shape remote reward models are asked in.

    service = RewardService(GroupRewarder(verifier))
    batch = service.rewards(queries=["Q: 2+2? A: 4", "Q: 2+2? A: 5"], prompts=["Q: 2+2?", "Q: 2+2?"])
    batch.rewards        # [0.7, 0.3]; None where verification failed (never 0)
    batch.to_openrlhf()  # {"rewards": [...], "scores": [...], "extra_logs": {...}}

A query is the prompt followed by the response (OpenRLHF sends both); the response is the
query with its prompt removed from the front. Queries of identical prompts form one group and
are rewarded against each other (:mod:`veriscale.rewards.group`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from veriscale.errors import UserError
from veriscale.rewards.group import GroupRewarder, groups_by_prompt


@dataclass
class RewardBatch:
    rewards: list[float | None]
    group_sizes: list[int]
    errors: list[str] = field(default_factory=list)

    def to_openrlhf(self) -> dict[str, Any]:
        failed = [1.0 if r is None else 0.0 for r in self.rewards]
        return {"rewards": self.rewards, "scores": self.rewards,
                "extra_logs": {"veriscale_group_size": [float(n) for n in self.group_sizes],
                               "veriscale_failed": failed}}


def response_of(query: str, prompt: str) -> str:
    """The response part of ``query``: what follows ``prompt`` when the query starts with it."""
    return query[len(prompt):] if prompt and query.startswith(prompt) else query


class RewardService:
    """Batches of queries in, one reward per query out (see the module docstring)."""

    def __init__(self, rewarder: GroupRewarder) -> None:
        self.rewarder = rewarder

    def rewards(self, queries: Sequence[Any], prompts: Sequence[Any]) -> RewardBatch:
        check_batch(queries, prompts)
        rewards: list[float | None] = [None] * len(queries)
        sizes = [0] * len(queries)
        errors: list[str] = []
        for members in groups_by_prompt(list(prompts)):
            prompt = prompts[members[0]]
            result = self.rewarder.group(prompt, [response_of(queries[i], prompt) for i in members])
            errors += result.errors
            for i, reward in zip(members, result.rewards):
                rewards[i], sizes[i] = reward, len(members)
        return RewardBatch(rewards, sizes, errors)


def check_batch(queries: Any, prompts: Any) -> None:
    """UserError naming the field when the batch is not two equal-length lists of strings."""
    for name, value in (("query", queries), ("prompts", prompts)):
        if not isinstance(value, list):
            raise UserError(f"'{name}' must be a list of strings, not {type(value).__name__}")
        bad = next((i for i, item in enumerate(value) if not isinstance(item, str)), None)
        if bad is not None:
            raise UserError(f"'{name}[{bad}]' is {type(value[bad]).__name__}, not a string")
    if len(queries) != len(prompts):
        raise UserError(f"'query' has {len(queries)} items but 'prompts' has {len(prompts)}: give one prompt per query")
