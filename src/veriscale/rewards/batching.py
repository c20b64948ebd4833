"""Concurrent reward requests merged into groups before they reach the verifier.

OpenRLHF asks its remote reward model about one query at a time, from many rollouts at once; a
GRPO group's completions therefore arrive as separate requests. The batcher holds each query
until its group is complete and rewards the group together, so the completions of one prompt
are still ranked against each other::

    batcher = RequestBatcher(service, group_size=8, group_wait_s=30)    # 8 = n_samples_per_prompt
    rewards = await batcher.submit(["<prompt><response>"], ["<prompt>"], None)   # one request's slice

A group is rewarded when ``group_size`` queries of its prompt have arrived, or ``group_wait_s``
after its first query, whichever comes first (a short group is still rewarded, against what
arrived). Without ``group_size``, queries are gathered for ``window_s`` after the first one and
then rewarded together: identical prompts within the window form one group. Each group is
rewarded in a worker thread, so groups run concurrently through the verifier's gateway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from veriscale.errors import UserError, setting
from veriscale.rewards.batch import RewardBatch
from veriscale.rewards.service import RewardService, check_batch, check_labels


@dataclass
class _Query:
    query: str
    prompt: str
    label: Any
    done: asyncio.Future


@dataclass
class _Pending:
    queries: list[_Query] = field(default_factory=list)
    timer: asyncio.TimerHandle | None = None


class RequestBatcher:
    """Merges concurrent requests' queries by prompt (see the module docstring)."""

    def __init__(self, service: RewardService, *, group_size: int | None = None,
                 group_wait_s: float = 30.0, window_s: float = 0.05) -> None:
        if group_size is not None and group_size < 1:
            raise UserError(f"{setting('group_size', str(group_size))} is below 1: give the number of samples per prompt")
        if group_wait_s <= 0:
            raise UserError(f"{setting('group_wait_s', f'{group_wait_s:g}')} is not above 0: give the seconds to wait for a group")
        if window_s < 0:
            raise UserError(f"batching window {window_s:g} s is negative: give 0 or more seconds")
        self.service, self.group_size = service, group_size
        self.wait_s = group_wait_s if group_size is not None else window_s
        self._pending: dict[Any, _Pending] = {}

    def _key(self, prompt: str, label: Any) -> Any:
        return (prompt, label) if self.group_size is not None else "window"

    async def submit(self, queries: Sequence[Any], prompts: Sequence[Any], labels: Sequence[Any] | None) -> RewardBatch:
        """Rewards for one request's queries, in order, once their groups have been rewarded."""
        check_batch(queries, prompts)
        if labels is not None:
            check_labels(labels, len(queries))
        loop = asyncio.get_running_loop()
        mine = []
        for i, (query, prompt) in enumerate(zip(queries, prompts)):
            item = _Query(query, prompt, labels[i] if labels is not None else None, loop.create_future())
            key = self._key(prompt, item.label)
            pending = self._pending.setdefault(key, _Pending())
            pending.queries.append(item)
            if self.group_size is not None and len(pending.queries) >= self.group_size:
                self._flush(key)
            elif pending.timer is None:
                pending.timer = loop.call_later(self.wait_s, self._flush, key)
            mine.append(item)
        results = await asyncio.gather(*(item.done for item in mine))
        return RewardBatch([r[0] for r in results], [r[1] for r in results], [r[2] for r in results],
                           unverified=[r[3] for r in results], scheme=self.service.rewarder.grouper.scheme)

    def _flush(self, key: Any) -> None:
        pending = self._pending.pop(key, None)
        if pending is None:
            return
        if pending.timer is not None:
            pending.timer.cancel()
        asyncio.get_running_loop().create_task(self._reward(pending.queries))

    async def _reward(self, items: list[_Query]) -> None:
        labels = [item.label for item in items]
        try:
            batch = await asyncio.to_thread(self.service.rewards, [i.query for i in items], [i.prompt for i in items],
                                            labels if any(label is not None for label in labels) else None)
        except Exception as exc:  # noqa: BLE001 - every waiting request must hear of it
            for item in items:
                if not item.done.done():
                    item.done.set_exception(exc)
            return
        for n, item in enumerate(items):
            if not item.done.done():
                item.done.set_result((batch.rewards[n], batch.group_sizes[n], batch.criteria[n], batch.unverified[n]))
