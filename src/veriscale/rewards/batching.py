"""Concurrent reward requests merged into groups before they reach the verifier.

OpenRLHF asks its remote reward model about one query at a time, from many rollouts at once; a
GRPO group's completions therefore arrive as separate requests. The batcher holds each query
until its group is complete and rewards the group together, so the completions of one prompt
are still ranked against each other::

    batcher = RequestBatcher(service, group_size=8, group_wait_s=30)    # 8 = n_samples_per_prompt
    rewards = await batcher.submit(["<prompt><response>"], ["<prompt>"], None)   # one request's slice
    ticket = batcher.join(queries, prompts, labels); await batcher.answer(ticket)  # the same, in two steps

A group is the queries of one prompt and label (a label that is not a string groups by its
canonical JSON). It is rewarded when ``group_size`` queries have arrived, or ``group_wait_s``
after its first query, whichever comes first: a short group is still rewarded, against what
arrived, and flagged ``partial_group``. Without ``group_size``, queries are gathered for
``window_s`` after the first one and then rewarded together: identical prompts within the window
form one group. Each group is rewarded in a worker thread, so groups run concurrently through the
verifier's gateway. What the answer's ``flags`` (OpenRLHF ``extra_logs.veriscale_<flag>``) say:

- ``partial_group``: its group was rewarded with fewer than ``group_size`` queries (the wait ran out);
- ``split_group``: more of its group came after an earlier slice had been rewarded (within
  ``group_wait_s``), so the group was ranked per slice; also logged as a warning;
- ``late``: ``answer_within_s`` ran out before its group was rewarded: it got the neutral value
  (0.5, or None with ``on_failure="null"``) and ``failed``, and its group's reward is still
  computed for a retry;
- ``retry``: the same (query, prompt, label) as a request whose client left before its answer
  (OpenRLHF's client retries after its 180 s timeout): it gets that first request's result and
  never joins the group twice. An identical query while the first one's client still waits is
  another rollout and joins the group as its own member;
- ``reward_length_corr``: the reward–length correlation over the last rewarded queries
  (:mod:`veriscale.rewards.length`; 0.0 until two of them differ).

``answer_within_s`` (``serve-reward --answer-within``) bounds each request's answer: a group waits
at most half of it to fill, and a request still waiting when it runs out is answered ``late``.
:meth:`flush_all` rewards every filling group now (``serve-reward`` calls it on SIGTERM).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from veriscale.errors import UserError, setting
from veriscale.rewards.batch import NEUTRAL_REWARD, RewardBatch
from veriscale.rewards.length import LengthMonitor
from veriscale.rewards.batch_rewards import RewardService, check_batch, check_labels, label_key, response_of

log = logging.getLogger("veriscale.rewards")

FLAGS = ("partial_group", "split_group", "late", "retry")
FILL_SHARE = 0.5  # with answer_within_s, a group waits at most this share of it to fill
ABANDONED_KEPT = 10_000  # queries whose client left, kept for a retry


@dataclass
class _Query:
    key: tuple[str, str, str | None]
    query: str
    prompt: str
    label: Any
    done: asyncio.Future
    waiters: int = 0          # requests waiting for it now
    delivered: bool = False   # a request answered it: its client will not retry
    split: bool = False


@dataclass
class _Pending:
    queries: list[_Query] = field(default_factory=list)
    timer: asyncio.TimerHandle | None = None


@dataclass
class Ticket:
    """One request's queries, as joined; ``retry[i]``: query i is a retry's, answered with the first's result."""

    items: list[_Query]
    retry: list[bool]
    released: bool = False


class RequestBatcher:
    """Merges concurrent requests' queries by prompt (see the module docstring)."""

    def __init__(self, service: RewardService, *, group_size: int | None = None,
                 group_wait_s: float = 30.0, window_s: float = 0.05, answer_within_s: float | None = None) -> None:
        if group_size is not None and group_size < 1:
            raise UserError(f"{setting('group_size', str(group_size))} is below 1: give the number of samples per prompt")
        if group_wait_s <= 0:
            raise UserError(f"{setting('group_wait_s', f'{group_wait_s:g}')} is not above 0: give the seconds to wait for a group")
        if window_s < 0:
            raise UserError(f"batching window {window_s:g} s is negative: give 0 or more seconds")
        if answer_within_s is not None and answer_within_s <= 0:
            raise UserError(f"{setting('reward_answer_within', f'{answer_within_s:g}')} is not above 0: "
                            "give the seconds within which a request is answered, below the client's timeout")
        self.service, self.group_size = service, group_size
        self.answer_within_s = answer_within_s
        self.wait_s = group_wait_s if group_size is not None else window_s
        if answer_within_s is not None:
            self.wait_s = min(self.wait_s, answer_within_s * FILL_SHARE)
        self.split_memory_s = group_wait_s
        self.lengths = LengthMonitor()
        self._pending: dict[Any, _Pending] = {}
        self._waiting: dict[tuple, _Query] = {}   # queries not yet delivered, by (query, prompt, label)
        self._abandoned: OrderedDict[tuple, _Query] = OrderedDict()
        self._flushed: dict[tuple[str, str | None], float] = {}  # group -> when a slice of it was rewarded
        self._partial_flushed: set[tuple[str, str | None]] = set()
        self._tasks: set[asyncio.Task] = set()  # groups being rewarded
        self.retried = 0  # retries answered with their first request's result

    def _key(self, prompt: str, label: str | None) -> Any:
        return (prompt, label) if self.group_size is not None else "window"

    async def submit(self, queries: Sequence[Any], prompts: Sequence[Any], labels: Sequence[Any] | None) -> RewardBatch:
        """Rewards for one request's queries, in order, once their groups have been rewarded."""
        return await self.answer(self.join(queries, prompts, labels))

    def join(self, queries: Sequence[Any], prompts: Sequence[Any], labels: Sequence[Any] | None) -> Ticket:
        """Add one request's queries to their groups (a retry's to none); :meth:`answer` awaits them."""
        check_batch(queries, prompts)
        if labels is not None:
            check_labels(labels, len(queries))
        loop = asyncio.get_running_loop()
        items, retry = [], []
        for i, (query, prompt) in enumerate(zip(queries, prompts)):
            label = labels[i] if labels is not None else None
            key = (query, prompt, label_key(label))
            first = self._abandoned.pop(key, None)
            if first is None and key in self._waiting and self._waiting[key].waiters == 0:
                first = self._waiting[key]
            if first is not None:  # its first request's client left: this is its retry
                self.retried += 1
                first.waiters += 1
                items.append(first)
                retry.append(True)
                continue
            item = _Query(key, query, prompt, label, loop.create_future(), waiters=1)
            self._waiting.setdefault(key, item)
            self._add(item, loop)
            items.append(item)
            retry.append(False)
        return Ticket(items, retry)

    def _add(self, item: _Query, loop: asyncio.AbstractEventLoop) -> None:
        group = (item.prompt, item.key[2])
        when = self._flushed.get(group)
        if when is not None and time.monotonic() - when <= self.split_memory_s and (
                self.group_size is None or group in self._partial_flushed):
            item.split = True
            log.warning("a slice of the group of prompt %.60r arrived after another slice was rewarded: the "
                        "group is ranked per slice (send a group's rollouts to one server, or raise --group-wait)",
                        item.prompt)
        key = self._key(item.prompt, item.key[2])
        pending = self._pending.setdefault(key, _Pending())
        pending.queries.append(item)
        if self.group_size is not None and len(pending.queries) >= self.group_size:
            self._flush(key)
        elif pending.timer is None:
            pending.timer = loop.call_later(self.wait_s, self._flush, key)

    async def answer(self, ticket: Ticket) -> RewardBatch:
        """The ticket's rewards, in order: within ``answer_within_s`` (the rest ``late``), else when ready."""
        try:
            futures = {item.done for item in ticket.items}
            if futures:
                await asyncio.wait(futures, timeout=self.answer_within_s)
            batch = self._batch(ticket)
            for item in ticket.items:
                item.delivered = True
                if self._waiting.get(item.key) is item:
                    del self._waiting[item.key]
            return batch
        finally:
            self.release(ticket)

    def release(self, ticket: Ticket) -> None:
        """The ticket's request is gone (answered, or its client left): a query it leaves undelivered
        is kept for a retry."""
        if ticket.released:
            return
        ticket.released = True
        for item in ticket.items:
            item.waiters -= 1
            if item.waiters == 0 and not item.delivered:
                self._waiting.pop(item.key, None)
                self._abandoned[item.key] = item
                self._abandoned.move_to_end(item.key)
                while len(self._abandoned) > ABANDONED_KEPT:
                    self._abandoned.popitem(last=False)

    def _batch(self, ticket: Ticket) -> RewardBatch:
        neutral = NEUTRAL_REWARD if self.service.on_failure == "neutral" else None
        rewards, sizes, criteria, unverified, pointwise = [], [], [], [], []
        flags: dict[str, list[float]] = {name: [] for name in FLAGS}
        for item, retried in zip(ticket.items, ticket.retry):
            ready = item.done.done()
            if ready and item.done.exception() is not None:
                raise item.done.exception()
            reward, size, crit, bad, alone, partial = item.done.result() if ready else (
                neutral, 0, {}, True, False, False)
            rewards.append(reward)
            sizes.append(size)
            criteria.append(crit)
            unverified.append(bad)
            pointwise.append(alone)
            for name, on in (("partial_group", partial), ("split_group", item.split), ("late", not ready),
                             ("retry", retried)):
                flags[name].append(1.0 if on else 0.0)
        corr = self.lengths.correlation()
        flags["reward_length_corr"] = [corr if corr is not None else 0.0] * len(rewards)
        return RewardBatch(rewards, sizes, criteria, unverified=unverified, scheme=self.service.rewarder.grouper.scheme,
                           pointwise=pointwise, flags=flags, length_corr=corr)

    @property
    def filling(self) -> int:
        """Queries waiting in groups that are still filling."""
        return sum(len(p.queries) for p in self._pending.values())

    def flush_all(self) -> None:
        """Reward every group still filling, now (on shutdown: the waiting requests get answers)."""
        for key in list(self._pending):
            self._flush(key)

    def _flush(self, key: Any) -> None:
        pending = self._pending.pop(key, None)
        if pending is None:
            return
        if pending.timer is not None:
            pending.timer.cancel()
        now = time.monotonic()
        partial = self.group_size is not None and len(pending.queries) < self.group_size
        for item in pending.queries:
            group = (item.prompt, item.key[2])
            self._flushed[group] = now
            if partial:
                self._partial_flushed.add(group)
            else:
                self._partial_flushed.discard(group)
        for group in [g for g, t in self._flushed.items() if now - t > self.split_memory_s]:
            del self._flushed[group]
            self._partial_flushed.discard(group)
        task = asyncio.get_running_loop().create_task(self._reward(pending.queries, partial))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait until every group being rewarded is done."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _reward(self, items: list[_Query], partial: bool) -> None:
        labels = [item.label for item in items]
        try:
            batch = await self.service.arewards([i.query for i in items], [i.prompt for i in items],
                                                labels if any(label is not None for label in labels) else None)
        except Exception as exc:  # noqa: BLE001 - every waiting request must hear of it
            for item in items:
                if not item.done.done():
                    item.done.set_exception(exc)
            return
        lengths = [len(response_of(i.query, i.prompt)) for i in items]
        self.lengths.add([r if not bad else None for r, bad in zip(batch.rewards, batch.unverified)], lengths)
        for n, item in enumerate(items):
            if not item.done.done():
                item.done.set_result((batch.rewards[n], batch.group_sizes[n], batch.criteria[n], batch.unverified[n],
                                      batch.pointwise[n], partial))
