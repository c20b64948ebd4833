"""The gateway: the one door every model call goes through, as an asyncio core.

Per call it looks up the store by key (a hit costs nothing), enforces the call budget before
spending, routes to an endpoint of the model's pool (prefix affinity, per-endpoint concurrency,
rate limits), bounds the call by a deadline, commits the outcome as it completes (a failure is
recorded, never turned into a score), counts usage, and links the call to the current run::

    gw = Gateway(backend, store, prompt_version="v3", run_id=run)
    outcomes = await gw.run([PlannedCall(request) for request in requests], progress=bar.advance)
    reply = await gw.chat(messages, tools=tools, seed=0)        # cached by messages, tools, params, seed
    gw.usage.model_calls, gw.usage.cache_hits

Synchronous code uses :class:`veriscale.engine.executor.CallExecutor`, a thin facade over this.
Cancelling a call leaves the store as it was: outcomes are written only once they are complete.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from veriscale.engine.routing import Endpoint, EndpointPool
from veriscale.engine.run_scope import current_run_id
from veriscale.engine.store import Store, call_key
from veriscale.engine.usage import Estimate, Usage
from veriscale.errors import BudgetExceeded, ModelCallError, setting, worded
from veriscale.models.base import ChatResponse, ModelBackend, ScoreRequest, ScoreResponse
from veriscale.models import weights

#: Version of the chat-call cache key (messages, tools, parameters, seed).
CHAT_KEY_VERSION = "chat-v1"


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


Progress = Callable[[CallOutcome], None]


def _blocking(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a synchronous backend method in a worker thread's frame; a StopIteration escaping it
    would never reach the awaiting coroutine (asyncio cannot carry it), so it becomes a RuntimeError."""
    try:
        return fn(*args, **kwargs)
    except StopIteration as exc:
        raise RuntimeError(f"{getattr(fn, '__qualname__', fn)} raised StopIteration") from exc


async def _call(backend: ModelBackend, method: str, *args: Any, **kwargs: Any) -> Any:
    """A backend method on the loop: its native ``a<method>`` if it has one, else in a worker thread."""
    native = getattr(backend, f"a{method}", None)
    if native is not None:
        return await native(*args, **kwargs)
    return await asyncio.to_thread(_blocking, getattr(backend, method), *args, **kwargs)


class SubCalls:
    """What a composite backend (two-stage) gets to make its steps as gateway calls::

        async def ascore_with(self, request, calls):
            analysis = await calls.chat(self.reasoner, messages, max_tokens=256)
            return await calls.score(self.scorer, scorer_request)
    """

    def __init__(self, gateway: "Gateway") -> None:
        self._gateway = gateway

    async def chat(self, backend: ModelBackend, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResponse:
        return await self._gateway.sub_chat(backend, messages, **kwargs)

    async def score(self, backend: ModelBackend, request: ScoreRequest, **kwargs: Any) -> ScoreResponse:
        return await self._gateway.sub_score(backend, request, **kwargs)


def _prompt_text(request: ScoreRequest) -> str:
    return "\n".join(m.content for m in request.messages) + request.prefill


class Gateway:
    """Model calls of one job (one model pool, one store, one budget, one run)."""

    def __init__(self, model: ModelBackend | EndpointPool | Sequence[ModelBackend], store: Store | None, *,
                 prompt_version: str, refresh: bool = False, max_calls: int | None = None,
                 concurrency: int = 4, run_id: int | None = None, deadline_s: float | None = None,
                 rpm: int | None = None, tpm: int | None = None) -> None:
        if isinstance(model, EndpointPool):
            self.pool = model
        else:
            backends = list(model) if isinstance(model, (list, tuple)) else [model]
            self.pool = EndpointPool(backends, concurrency=max(1, concurrency), rpm=rpm, tpm=tpm)
        self.model = self.pool.primary
        self.store = store
        self.prompt_version = prompt_version
        self.refresh = refresh
        self.max_calls = max_calls
        self.run_id = run_id
        self.deadline_s = deadline_s if deadline_s is not None else self.pool.deadline_s
        self.usage = Usage()
        self._fingerprint: str | None = None

    # -- keys and the cache ------------------------------------------------------------------
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = self.model.fingerprint()
            weights.note_fingerprint(self.store, self.model.uri, self._fingerprint)
        return self._fingerprint

    def keyed(self, calls: Sequence[PlannedCall]) -> list[PlannedCall]:
        for c in calls:
            if not c.key:
                c.key = call_key(self.fingerprint(), self.prompt_version, c.request.to_dict())
        return list(calls)

    def _cached(self, key: str, owner: ModelBackend | None = None) -> dict[str, Any] | None:
        if self.refresh or self.store is None:
            return None
        hit = self.store.get_call(key)
        return hit if weights.serves(self.store, (owner or self.model).uri, hit) else None

    def _link(self, key: str, *, cache_hit: bool, label: str | None = None, run_id: int | None = None) -> None:
        if run_id is None:  # the gateway's own run if it was made for one, else the caller's current run
            run_id = self.run_id if self.run_id is not None else current_run_id()
        if self.store is not None and run_id is not None:
            self.store.link_call(run_id, key, cache_hit=cache_hit, label=label)

    def _check_budget(self, new_calls: int) -> None:
        if self.max_calls is not None and self.usage.model_calls + new_calls > self.max_calls:
            raise BudgetExceeded(
                f"this needs {new_calls} new model calls but the call budget ({setting('max_calls')}) allows "
                f"{self.max_calls - self.usage.model_calls}: raise {setting('max_calls')}, "
                f"or lower {setting('repeats')} or {setting('criteria')}"
            )

    def estimate(self, calls: Sequence[PlannedCall]) -> Estimate:
        """Count calls the store cannot answer and the prompt tokens they would send."""
        calls = self.keyed(calls)
        pending = [c for c in calls if self._cached(c.key) is None]
        tokens = sum(self.model.count_tokens(_prompt_text(c.request)) for c in pending)
        return Estimate(len(pending), len(calls) - len(pending), tokens, self.pool.is_embedded)

    # -- calling an endpoint -----------------------------------------------------------------
    async def _invoke(self, endpoint: Endpoint, method: str, tokens: int, *args: Any, **kwargs: Any) -> Any:
        backend = endpoint.backend
        composite = getattr(backend, "ascore_with", None) if method == "score" else None
        async with endpoint.slot(tokens=tokens):
            work = composite(*args, SubCalls(self)) if composite else _call(backend, method, *args, **kwargs)
            if self.deadline_s is None:
                return await work
            try:
                return await asyncio.wait_for(work, self.deadline_s)
            except asyncio.TimeoutError:
                raise ModelCallError(f"model call to {backend.display_name} passed its {self.deadline_s:g} s deadline "
                                     f"({setting('deadline_s')})", retryable=True) from None

    def _record(self, key: str, request: dict[str, Any], *, kind: str, response: dict[str, Any] | None,
                error: str | None, latency_s: float | None, prompt_tokens: int = 0, cached_tokens: int = 0,
                completion_tokens: int = 0, model: ModelBackend | None = None, counted: bool = True) -> None:
        """Commit one outcome and count it (``counted=False``: a composite's own record, whose steps counted)."""
        if self.store is not None:
            owner = model or self.model
            weights.note_reply(self.store, owner.uri, response)
            self.store.put_call(key, model=owner.uri, fingerprint=owner.fingerprint() if model else self.fingerprint(),
                                prompt_version=self.prompt_version if kind == "score" else CHAT_KEY_VERSION,
                                request=request, status="failed" if error else "ok", response=response,
                                error=error, latency_s=latency_s, kind=kind, prompt_tokens=prompt_tokens,
                                cached_tokens=cached_tokens, completion_tokens=completion_tokens)
        if not counted:
            return
        if error:
            self.usage.failed_calls += 1
            return
        self.usage.model_calls += 1
        self.usage.prompt_tokens += prompt_tokens
        self.usage.cached_prompt_tokens += cached_tokens
        self.usage.completion_tokens += completion_tokens
        self.usage.latency_s += latency_s or 0.0

    async def _once(self, key: str, request: dict[str, Any], *, kind: str, make: Callable[[], Awaitable[Any]],
                    owner: ModelBackend | None = None, label: str | None = None, budget: bool = False,
                    run_id: int | None = None) -> Any:
        """One cached call: a hit comes from the store; otherwise ``make()`` runs and its outcome is
        committed, counted and linked (a failure is recorded, then raised)."""
        if (hit := self._cached(key, owner)) is not None:
            self.usage.cache_hits += 1
            self._link(key, cache_hit=True, label=label, run_id=run_id)
            return ChatResponse(**hit) if kind == "chat" else ScoreResponse.from_dict(hit)
        if budget:
            self._check_budget(1)
        started = time.perf_counter()
        try:
            reply = await make()
        except ModelCallError as exc:
            self._record(key, request, kind=kind, response=None, error=worded(exc.template),
                         latency_s=time.perf_counter() - started, model=owner)
            self._link(key, cache_hit=False, label=label, run_id=run_id)
            raise
        self._record(key, request, kind=kind, response=asdict(reply), error=None,
                     latency_s=getattr(reply, "latency_s", 0.0) or time.perf_counter() - started,
                     prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens, model=owner)
        self._link(key, cache_hit=False, label=label, run_id=run_id)
        return reply

    async def sub_chat(self, backend: ModelBackend, messages: list[dict[str, Any]], *, max_tokens: int = 512,
                       temperature: float = 0.0, label: str | None = None) -> ChatResponse:
        """A composite backend's chat step: cached under that backend's own fingerprint, recorded, linked."""
        request = {"messages": messages, "tools": [], "max_tokens": max_tokens, "temperature": temperature, "seed": None}
        return await self._once(call_key(backend.fingerprint(), CHAT_KEY_VERSION, request), request, kind="chat",
                                owner=backend, label=label,
                                make=lambda: _call(backend, "chat", messages, max_tokens=max_tokens, temperature=temperature))

    async def sub_score(self, backend: ModelBackend, request: ScoreRequest, *, label: str | None = None) -> ScoreResponse:
        """A composite backend's scoring step: cached under that backend's fingerprint, recorded, linked."""
        return await self._once(call_key(backend.fingerprint(), self.prompt_version, request.to_dict()),
                                request.to_dict(), kind="score", owner=backend, label=label,
                                make=lambda: _call(backend, "score", request))

    async def _score_new(self, call: PlannedCall) -> tuple[ScoreResponse | None, str | None]:
        text = _prompt_text(call.request)
        endpoint = self.pool.pick(text)
        started = time.perf_counter()
        try:
            resp: ScoreResponse = await self._invoke(endpoint, "score", self.model.count_tokens(text), call.request)
        except ModelCallError as exc:
            self._record(call.key, call.request.to_dict(), kind="score", response=None, error=worded(exc.template),
                         latency_s=time.perf_counter() - started)
            self._link(call.key, cache_hit=False)
            return None, worded(exc.template)  # reads with Python names; the CLI names flags
        composite = hasattr(endpoint.backend, "ascore_with")
        self._record(call.key, call.request.to_dict(), kind="score", response=resp.to_dict(), error=None,
                     latency_s=resp.latency_s, prompt_tokens=resp.prompt_tokens,
                     cached_tokens=max(0, resp.prompt_tokens_total - resp.prompt_tokens) if self.pool.is_embedded else 0,
                     completion_tokens=resp.completion_tokens, counted=not composite)
        if not composite:  # a composite's steps are linked themselves
            self._link(call.key, cache_hit=False)
        return resp, None

    # -- score calls -------------------------------------------------------------------------
    async def run(self, calls: Sequence[PlannedCall], progress: Progress | None = None) -> list[CallOutcome]:
        """Answer every call (cache first), in order; raises BudgetExceeded before spending."""
        calls = self.keyed(calls)
        cached: dict[str, ScoreResponse] = {}
        for c in calls:
            if c.key not in cached and (hit := self._cached(c.key)) is not None:
                cached[c.key] = ScoreResponse.from_dict(hit)
        pending = list(dict.fromkeys(c.key for c in calls if c.key not in cached))
        self._check_budget(len(pending))
        first = {c.key: c for c in reversed(calls) if c.key in pending}
        results: dict[str, tuple[ScoreResponse | None, str | None]] = {}

        async def one(key: str) -> None:
            results[key] = await self._score_new(first[key])
            if progress is not None:
                resp, err = results[key]
                progress(CallOutcome(first[key], resp, False, err))

        if self.pool.is_embedded:  # in plan order: consecutive calls share their prefix in the KV cache
            for key in pending:
                await one(key)
        else:
            await asyncio.gather(*(one(key) for key in pending))
        outcomes = []
        for c in calls:
            if c.key in cached:
                self.usage.cache_hits += 1
                self._link(c.key, cache_hit=True)
                outcome = CallOutcome(c, cached[c.key], True)
                if progress is not None:
                    progress(outcome)
            else:
                resp, err = results[c.key]
                outcome = CallOutcome(c, resp, False, err)
            outcomes.append(outcome)
        return outcomes

    # -- chat calls --------------------------------------------------------------------------
    async def chat(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                   max_tokens: int = 512, temperature: float = 0.0, seed: int | None = None,
                   label: str | None = None, run_id: int | None = None) -> ChatResponse:
        """One chat completion, cached by (messages, tools, parameters, seed); ModelCallError on failure.

        ``run_id`` links the call to that run instead of the gateway's current one (a proxy
        answers many requests at once on one gateway, each its own run)."""
        request = {"messages": messages, "tools": tools or [], "max_tokens": max_tokens,
                   "temperature": temperature, "seed": seed}

        async def make() -> ChatResponse:
            text = "\n".join(str(m.get("content") or "") for m in messages)
            return await self._invoke(self.pool.pick(text), "chat", self.model.count_tokens(text), list(messages),
                                      tools=tools, max_tokens=max_tokens, temperature=temperature,
                                      **({"seed": seed} if seed is not None else {}))

        return await self._once(call_key(self.fingerprint(), CHAT_KEY_VERSION, request), request, kind="chat",
                                make=make, label=label, budget=True, run_id=run_id)
