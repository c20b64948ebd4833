"""Runs planned model calls through the store: cached calls cost nothing, new ones are
committed as they complete, failures are recorded and reported, never turned into scores.

    ex = CallExecutor(model, store, prompt_version="v1", max_calls=100)
    outcomes = ex.run([PlannedCall(request=req) for req in requests])
    ex.usage.model_calls, ex.usage.cache_hits

The embedded model runs calls one by one in plan order (its KV cache reuses the shared prefix
of consecutive calls); HTTP backends run up to ``concurrency`` calls at once.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from veriscale.engine.store import Store, call_key
from veriscale.errors import BudgetExceeded, ModelCallError
from veriscale.models.base import ModelBackend, ScoreRequest, ScoreResponse


@dataclass
class PlannedCall:
    request: ScoreRequest
    tag: Any = None  # the caller's bookkeeping (criterion, repeat, slot...)
    key: str = ""


@dataclass
class CallOutcome:
    call: PlannedCall
    response: ScoreResponse | None
    cache_hit: bool
    error: str | None = None


@dataclass
class Usage:
    """What a piece of work cost; ``prompt_tokens`` counts tokens the model actually processed."""

    model_calls: int = 0
    cache_hits: int = 0
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, other: "Usage") -> None:
        for name in ("model_calls", "cache_hits", "failed_calls", "prompt_tokens", "completion_tokens"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)

    def copy(self) -> "Usage":
        return Usage(**self.__dict__)

    def since(self, before: "Usage") -> "Usage":
        """What was spent between the snapshot ``before`` and now."""
        return Usage(**{k: v - getattr(before, k) for k, v in self.__dict__.items()})


@dataclass
class Estimate:
    """What ``--dry-run`` reports: calls not yet in the store and their prompt tokens."""

    calls: int
    cached: int
    prompt_tokens: int
    token_count_exact: bool = True


class CallExecutor:
    """Owns the cache lookups, the call budget and the usage counters for one job."""

    def __init__(self, model: ModelBackend, store: Store | None, *, prompt_version: str,
                 refresh: bool = False, max_calls: int | None = None, concurrency: int = 4,
                 on_done: Callable[[CallOutcome], None] | None = None) -> None:
        self.model = model
        self.store = store
        self.prompt_version = prompt_version
        self.refresh = refresh
        self.max_calls = max_calls
        self.concurrency = 1 if getattr(model, "is_embedded", False) else max(1, concurrency)
        self.on_done = on_done
        self.usage = Usage()
        self._lock = threading.Lock()
        self._fingerprint: str | None = None

    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = self.model.fingerprint()
        return self._fingerprint

    def keyed(self, calls: Sequence[PlannedCall]) -> list[PlannedCall]:
        for c in calls:
            if not c.key:
                c.key = call_key(self.fingerprint(), self.prompt_version, c.request.to_dict())
        return list(calls)

    def _cached(self, call: PlannedCall) -> ScoreResponse | None:
        if self.refresh or self.store is None:
            return None
        hit = self.store.get_call(call.key)
        return ScoreResponse.from_dict(hit) if hit is not None else None

    def estimate(self, calls: Sequence[PlannedCall]) -> Estimate:
        """Count calls the store cannot answer and the prompt tokens they would send."""
        calls = self.keyed(calls)
        pending = [c for c in calls if self._cached(c) is None]
        tokens = 0
        for c in pending:
            text = "\n".join(m.content for m in c.request.messages) + c.request.prefill
            tokens += self.model.count_tokens(text)
        exact = bool(getattr(self.model, "is_embedded", False))
        return Estimate(len(pending), len(calls) - len(pending), tokens, exact)

    def run(self, calls: Sequence[PlannedCall]) -> list[CallOutcome]:
        """Answer every call (cache first), in order; raises BudgetExceeded before spending."""
        calls = self.keyed(calls)
        cached = {c.key: r for c in calls if (r := self._cached(c)) is not None}
        pending_keys = list(dict.fromkeys(c.key for c in calls if c.key not in cached))
        if self.max_calls is not None and self.usage.model_calls + len(pending_keys) > self.max_calls:
            raise BudgetExceeded(
                f"this needs {len(pending_keys)} new model calls but --max-calls allows "
                f"{self.max_calls - self.usage.model_calls}: raise --max-calls, or lower --repeats/--criteria"
            )
        results: dict[str, tuple[ScoreResponse | None, str | None]] = {}
        first_of_key = {c.key: c for c in reversed(calls) if c.key in pending_keys}

        def do(key: str) -> None:
            call = first_of_key[key]
            try:
                resp = self.model.score(call.request)
            except ModelCallError as exc:
                results[key] = (None, str(exc))
                if self.store is not None:
                    self.store.put_call(key, model=self.model.uri, fingerprint=self.fingerprint(),
                                        prompt_version=self.prompt_version, request=call.request.to_dict(),
                                        status="failed", error=str(exc))
                with self._lock:
                    self.usage.failed_calls += 1
                if self.on_done:
                    self.on_done(CallOutcome(call, None, False, str(exc)))
                return
            if self.store is not None:
                self.store.put_call(key, model=self.model.uri, fingerprint=self.fingerprint(),
                                    prompt_version=self.prompt_version, request=call.request.to_dict(),
                                    status="ok", response=resp.to_dict(), latency_s=resp.latency_s)
            results[key] = (resp, None)
            with self._lock:
                self.usage.model_calls += 1
                self.usage.prompt_tokens += resp.prompt_tokens
                self.usage.completion_tokens += resp.completion_tokens
            if self.on_done:
                self.on_done(CallOutcome(call, resp, False))

        if self.concurrency == 1:
            for key in pending_keys:
                do(key)
        else:
            with ThreadPoolExecutor(self.concurrency) as pool:
                list(pool.map(do, pending_keys))

        outcomes = []
        for c in calls:
            if c.key in cached:
                self.usage.cache_hits += 1
                outcome = CallOutcome(c, cached[c.key], True)
                if self.on_done:
                    self.on_done(outcome)
            else:
                resp, err = results[c.key]
                outcome = CallOutcome(c, resp, False, err)
            outcomes.append(outcome)
        return outcomes
