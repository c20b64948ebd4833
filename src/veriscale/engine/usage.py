"""What model work cost, and what ``--dry-run`` says it would cost.

    usage = Usage(); usage.add_call(CallTokens.of(reply, embedded=False), latency_s=0.4)
    spent = usage.since(snapshot)          # what happened after ``snapshot = usage.copy()``
    with usage_tap() as mine: ...          # what this context (and the tasks it starts) spent of a gateway
    usage.to_dict()["prompt_tokens_processed"]   # None when a server did not say (unknown, not 0)
    usage.tokenizer_requests                     # set by the job that fitted the prompts (select, bench)

Three prompt counts, never mixed: tokens *sent* (every prompt's length), tokens the model
*processed* and tokens it served from a *cache*; the last two only where the model says so
(an HTTP server's usage/timings, :mod:`veriscale.models.reply_usage`; the embedded model counts
the tokens it evaluated after reusing its KV cache).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields, replace
from typing import Any


@dataclass(frozen=True)
class CallTokens:
    """One answered call's tokens; ``processed``/``cached`` None: the model did not say."""

    sent: int = 0
    processed: int | None = None
    cached: int | None = None
    completion: int = 0

    @classmethod
    def of(cls, reply: Any, *, embedded: bool) -> CallTokens:
        """From a ScoreResponse or ChatResponse. An embedded score reply's ``prompt_tokens`` is what
        the model evaluated of ``prompt_tokens_total`` (the rest came from its KV cache)."""
        total = int(getattr(reply, "prompt_tokens_total", 0) or 0)
        sent = total or int(getattr(reply, "prompt_tokens", 0) or 0)
        cached = getattr(reply, "cached_prompt_tokens", None)
        if cached is None and embedded and total:
            cached = max(0, total - int(reply.prompt_tokens or 0))
        processed = None if cached is None else max(0, sent - int(cached))
        return cls(sent=sent, processed=processed, cached=None if cached is None else int(cached),
                   completion=int(getattr(reply, "completion_tokens", 0) or 0))


@dataclass
class Usage:
    """Counters of one job. ``prompt_tokens`` counts tokens sent; ``processed_prompt_tokens`` and
    ``cached_prompt_tokens`` sum over the calls whose model said, ``unreported_calls`` counts the rest."""

    model_calls: int = 0
    cache_hits: int = 0
    failed_calls: int = 0
    cancelled_calls: int = 0        # stopped before an answer came (a cancel, a sibling's error): asked again on a rerun
    prompt_tokens: int = 0          # prompt tokens sent (the prompts' length), every answered call
    processed_prompt_tokens: int = 0  # prompt tokens the model evaluated, over the calls that said
    cached_prompt_tokens: int = 0   # prompt tokens served from a cache, over the calls that said
    unreported_calls: int = 0       # answered calls whose model did not say what it processed
    completion_tokens: int = 0
    latency_s: float = 0.0          # summed over model calls (not wall time)
    tokenizer_requests: int = 0     # requests to a server's tokenizer (fitting prompts, label checks): no model calls

    def add_call(self, tokens: CallTokens, latency_s: float = 0.0) -> None:
        """Count one answered call."""
        self.model_calls += 1
        self.prompt_tokens += tokens.sent
        self.completion_tokens += tokens.completion
        self.latency_s += latency_s
        if tokens.processed is None:
            self.unreported_calls += 1
        else:
            self.processed_prompt_tokens += tokens.processed
            self.cached_prompt_tokens += tokens.cached or 0

    @property
    def processed(self) -> int | None:
        """Prompt tokens processed over every answered call; None when any call did not say."""
        return None if self.unreported_calls else self.processed_prompt_tokens

    def add(self, other: Usage) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def counters(self) -> dict[str, float]:
        """The raw counters (what :meth:`copy` and :meth:`since` work on)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def to_dict(self) -> dict[str, Any]:
        """The counters, plus ``prompt_tokens_sent`` and ``prompt_tokens_processed`` / ``cached_prompt_tokens``
        as None when some call did not report them."""
        out: dict[str, Any] = self.counters()
        out["prompt_tokens_sent"] = self.prompt_tokens
        out["prompt_tokens_processed"] = self.processed
        if self.unreported_calls:
            out["cached_prompt_tokens"] = None
        return out

    def copy(self) -> Usage:
        return replace(self)

    def since(self, before: Usage) -> Usage:
        """What was spent between the snapshot ``before`` and now."""
        spent = replace(self)
        for f in fields(self):
            setattr(spent, f.name, getattr(self, f.name) - getattr(before, f.name))
        return spent


class GatewayUsage(Usage):
    """A gateway's counters, whose every count also goes to the taps open in the counting context
    (:func:`usage_tap`): concurrent jobs on one gateway each learn what they spent, not the sum."""

    def count(self, name: str) -> None:
        """One more ``cache_hits``, ``failed_calls`` or ``cancelled_calls``."""
        for usage in (self, *_TAPS.get()):
            setattr(usage, name, getattr(usage, name) + 1)

    def add_call(self, tokens: CallTokens, latency_s: float = 0.0) -> None:
        super().add_call(tokens, latency_s)
        for tap in _TAPS.get():
            tap.add_call(tokens, latency_s)


_TAPS: ContextVar[tuple[Usage, ...]] = ContextVar("veriscale_usage_taps", default=())


@contextmanager
def usage_tap() -> Iterator[Usage]:
    """A :class:`Usage` counting what every gateway spends for this context and the tasks started in
    it (asyncio copies the context into a task), nested taps each counting::

        with usage_tap() as spent:
            await aselect(task, runs, verifier=v)
        spent.model_calls
    """
    tap = Usage()
    token = _TAPS.set((*_TAPS.get(), tap))
    try:
        yield tap
    finally:
        _TAPS.reset(token)


@dataclass
class Estimate:
    """What ``--dry-run`` reports: calls not yet in the store and their prompt tokens."""

    calls: int
    cached: int
    prompt_tokens: int
    token_count_exact: bool = True
