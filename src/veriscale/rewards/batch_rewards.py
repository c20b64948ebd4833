"""Rewards for a batch of (prompt, query) pairs, the shape remote reward models are asked in.

    service = RewardService(BatchRewarder(verifier))
    batch = service.rewards(queries=["Q: 2+2? A: 4", "Q: 2+2? A: 5"], prompts=["Q: 2+2?", "Q: 2+2?"])
    batch.rewards        # [0.7, 0.3]; None where verification failed (never 0)
    batch.to_openrlhf()  # {"rewards": [...], "scores": [...], "extra_logs": {...}}

A query is the prompt followed by the response (OpenRLHF sends both); the response is the
query with its prompt removed from the front. A label, when OpenRLHF sends one (the dataset's
reference answer), is shown to the judge as the reference for that query's task. Queries of identical prompts form one group and
are rewarded against each other (:mod:`veriscale.rewards.batch`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from veriscale.errors import UserError, setting
from veriscale.rewards.batch import BatchRewarder, RewardBatch
from veriscale.rewards.texts import with_reference


def response_of(query: str, prompt: str) -> str:
    """The response part of ``query``: what follows ``prompt`` when the query starts with it."""
    return query[len(prompt):] if prompt and query.startswith(prompt) else query


ON_FAILURE = ("neutral", "null")


class RewardService:
    """Batches of queries in, one reward per query out (see the module docstring).

    A query whose verification failed has no reward of its own. OpenRLHF cannot take a null
    reward (it builds a tensor of it), so by default (``on_failure="neutral"``) such a query gets
    its group's mean verified reward (0.5 when none is verified): advantage 0, no push either
    way, and ``extra_logs.veriscale_failed`` says it was not verified. ``on_failure="null"``
    answers None instead, for clients that can take it. Never 0.
    """

    def __init__(self, rewarder: BatchRewarder, *, on_failure: str = "neutral") -> None:
        if on_failure not in ON_FAILURE:
            raise UserError(f"{setting('on_failure', on_failure)} is unknown: use one of {', '.join(ON_FAILURE)}")
        self.rewarder, self.on_failure = rewarder, on_failure

    def rewards(self, queries: Sequence[Any], prompts: Sequence[Any], labels: Sequence[Any] | None = None) -> RewardBatch:
        """``labels`` (OpenRLHF's reference answers, optional) are shown to the judge with each task."""
        tasks, responses = self._pairs(queries, prompts, labels)
        return self._filled(self.rewarder.rewards(tasks, responses))

    async def arewards(self, queries: Sequence[Any], prompts: Sequence[Any],
                       labels: Sequence[Any] | None = None) -> RewardBatch:
        """:meth:`rewards` awaited on the caller's loop (the reward server's)."""
        tasks, responses = self._pairs(queries, prompts, labels)
        return self._filled(await self.rewarder.arewards(tasks, responses))

    def _pairs(self, queries: Sequence[Any], prompts: Sequence[Any],
               labels: Sequence[Any] | None) -> tuple[list[str], list[str]]:
        check_batch(queries, prompts)
        responses = [response_of(q, p) for q, p in zip(queries, prompts)]
        tasks = list(prompts)
        if labels is not None:
            check_labels(labels, len(queries))
            tasks = [with_reference(t, label_key(label)) for t, label in zip(tasks, labels)]
        return tasks, responses

    def _filled(self, batch: RewardBatch) -> RewardBatch:
        return batch.neutral_filled() if self.on_failure == "neutral" else batch


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


def check_labels(labels: Any, n: int) -> None:
    """UserError when ``labels`` is given but is not one label per query. A label is any JSON
    value: OpenRLHF sends the dataset's label column as it is (``[3]``, ``{"answer": 3}``, ``"3"``)."""
    if not isinstance(labels, list):
        raise UserError(f"'labels' must be a list with one label per query, not {type(labels).__name__}")
    if len(labels) != n:
        raise UserError(f"'labels' has {len(labels)} items but 'query' has {n}: give one label per query or none")


def label_key(label: Any) -> str | None:
    """A label as the text it groups by: a string as it is, any other JSON value as canonical JSON
    (sorted keys, compact), so ``{"b": 1, "a": [3]}`` and ``{"a": [3], "b": 1}`` are one group."""
    if label is None or isinstance(label, str):
        return label
    return json.dumps(label, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
