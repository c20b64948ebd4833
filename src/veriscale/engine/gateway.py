"""The gateway: the one door every model call goes through, as an asyncio core.

Per call it looks up the store by key (a hit costs nothing), claims the call in the store so no
other process pays for it too, checks the call budget before each spend, routes to an endpoint
of the model's pool (prefix affinity; per-endpoint concurrency and rate limits, one set per
endpoint per process: :mod:`veriscale.engine.routing`), bounds the call by a deadline,
validates the reply (:mod:`veriscale.engine.replies`), commits the outcome as it completes,
counts usage, and links the call to the current run::

    gw = Gateway(backend, store, prompt_version="v3", run_id=run)
    outcomes = await gw.run([PlannedCall(request) for request in requests], progress=bar.advance)
    reply = await gw.chat(messages, tools=tools, seed=0)        # cached by messages, tools, params, seed
    gw.usage.model_calls, gw.usage.cache_hits

Synchronous code uses :class:`veriscale.engine.sync_facade.CallExecutor`, a thin facade over this.

Parts. The gateway holds an :class:`veriscale.engine.call_outcomes.OutcomeRecorder` (``gw.outcomes``:
every sent call's outcome recorded, counted and linked to the run) and a
:class:`veriscale.engine.composite_steps.CompositeSteps` over itself (``gw.steps``: a two-stage
backend's steps as gateway calls of their own; ``gw.sub_chat`` and ``gw.sub_score`` are its); its keys,
stored answers and claims are those of :class:`veriscale.engine.gateway_cache.GatewayCache`, its base::

    gw.outcomes.link(key, cache_hit=True)
    analysis = await gw.sub_chat(reasoner, messages, max_tokens=256)

Outcomes. Every call the gateway starts ends in a record: ``ok``; ``failed`` with its reason (the
backend's error, or a reply with no probability on any score label, or no logprobs at the
slot: these are that call's failure, never a set-up error); or ``cancelled`` when it was stopped
before an answer came. A rerun asks again for every call that is not ``ok``. A
deterministic call (temperature 0) whose reply is off-format is asked once more in the same run,
with the backend's ``retry_variant()`` when it has one, before it is reported as "the judge
cannot grade this". That retry is another request: it is keyed by what it sends (the variant's
fingerprint) and recorded under that key, and the planned call's key points to it
(:class:`veriscale.engine.replies.Answered`), so a rerun serves the same answer from the store.

Structure. The calls of one :meth:`Gateway.run` run in a task group: a set-up error (a
``UserError`` such as a prompt past the context, a budget refusal) cancels the siblings, and each
of them records that it was cancelled. A deadline (``deadline_s``) cancels the work itself: the
HTTP request over the async client, the embedded model at its next token or prompt batch
(:mod:`veriscale.models.cancel`); the slot is freed only when the work has stopped.

Nothing blocks the gateway's loop: store reads and writes go through the store's one writer
thread (:meth:`veriscale.engine.store.Store.submit`), the model-id probe uses the async client.

One call, one payment, across processes: before sending a call the gateway claims its key in
the store (a lease, renewed while the call runs); a process that finds the key claimed by a live
owner waits for that owner's result instead of sending the call, and takes the call over when
the owner's call failed or its lease expired (the owner was killed)::

    Gateway(backend, store, prompt_version="v3", lease_s=30)   # a dead owner's claim lapses after 30 s
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, TypeVar

from veriscale.engine.backend_calls import (
    afingerprint,
    aweights_fingerprint,
    call_backend,
)
from veriscale.engine.call_claims import LEASE_S, CallClaims
from veriscale.engine.call_outcomes import OutcomeRecorder, score_images
from veriscale.engine.composite_steps import CompositeSteps
from veriscale.engine.gateway_cache import GatewayCache, _prompt_text
from veriscale.engine.planned import CallOutcome, PlannedCall, Progress
from veriscale.engine.replies import (
    CHAT,
    SCORE,
    Answered,
    Reply,
    ReplyKind,
    cannot_grade,
    deterministic,
    retry_of,
    score_reply_problem,
    with_cost_of,
)
from veriscale.engine.routing import Endpoint, EndpointPool
from veriscale.engine.store import CHAT_KEY_VERSION, KeptImage, Store, call_key
from veriscale.engine.usage import GatewayUsage
from veriscale.errors import BudgetExceeded, ModelCallError, setting
from veriscale.models.abilities import ComposedScore, calls_per_score
from veriscale.models.base import (
    ChatResponse,
    ModelBackend,
    ScoreRequest,
    ScoreResponse,
)

__all__ = ["CHAT_KEY_VERSION", "CallOutcome", "Gateway", "PlannedCall", "Progress"]

_T = TypeVar("_T")


def _first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The error a task group stands for: the first that is not a cancellation."""
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            return _first_error(exc)
        if not isinstance(exc, asyncio.CancelledError):
            return exc
    return group.exceptions[0]


class Gateway(GatewayCache):
    """Model calls of one job (one model pool, one store, one budget, one run)."""

    def __init__(self, model: ModelBackend | EndpointPool | Sequence[ModelBackend], store: Store | None, *,
                 prompt_version: str, refresh: bool = False, max_calls: int | None = None,
                 concurrency: int = 4, run_id: int | None = None, deadline_s: float | None = None,
                 rpm: int | None = None, tpm: int | None = None, lease_s: float = LEASE_S) -> None:
        if isinstance(model, EndpointPool):
            self.pool = model
        else:
            backends = list(model) if isinstance(model, Sequence) else [model]
            self.pool = EndpointPool(backends, concurrency=max(1, concurrency), rpm=rpm, tpm=tpm)
        self.model = self.pool.primary
        self.store = store
        self.prompt_version = prompt_version
        self.refresh = refresh
        self.max_calls = max_calls
        self.concurrency = max(1, concurrency)
        self.run_id = run_id
        self.deadline_s = deadline_s if deadline_s is not None else self.pool.deadline_s
        self.lease_s = lease_s
        self.claims = CallClaims(store, self._io, lease_s)
        self.usage = GatewayUsage()
        self._spent = 0  # calls sent (answered or failed), what the budget counts
        self._fingerprint: str | None = None
        self._opened_at = time.time()  # a refreshing gateway takes answers written after this
        self._stale: set[str] = set()  # keys whose stored answer names older weights: asked again
        self.outcomes = OutcomeRecorder(store, self.usage, self.claims, model=self.model,
                                        embedded=self.pool.is_embedded, run_id=run_id,
                                        prompt_version=prompt_version, fingerprint=self.fingerprint,
                                        io=self._io, spend=self._spend)
        self.steps = CompositeSteps(self)

    # -- the call budget (keys, the cache and claims: :mod:`veriscale.engine.gateway_cache`) ---
    def _check_budget(self, new_calls: int) -> None:
        if self.max_calls is not None and self._spent + new_calls > self.max_calls:
            raise BudgetExceeded(
                f"this needs {new_calls} new model calls but the call budget ({setting('max_calls')}) allows "
                f"{self.max_calls - self._spent}: raise {setting('max_calls')}, "
                f"or lower {setting('repeats')} or {setting('criteria')}"
            )

    def _spend(self) -> None:
        """Count one call about to be sent; refuse it when the budget is spent."""
        if self.max_calls is not None and self._spent + 1 > self.max_calls:
            raise BudgetExceeded(
                f"the call budget ({setting('max_calls')}) of {self.max_calls} model calls is spent: "
                f"raise {setting('max_calls')}, or lower {setting('repeats')} or {setting('criteria')}")
        self._spent += 1

    # -- calling an endpoint -----------------------------------------------------------------
    async def _bounded(self, backend: ModelBackend, work: Awaitable[_T]) -> _T:
        """``work`` under the deadline; past it, the work is cancelled (and stops) before this raises."""
        if self.deadline_s is None:
            return await work
        try:
            return await asyncio.wait_for(work, self.deadline_s)
        except TimeoutError:
            raise ModelCallError(f"model call to {backend.display_name} passed its {self.deadline_s:g} s deadline "
                                 f"({setting('deadline_s')})", retryable=True) from None

    async def _invoke(self, endpoint: Endpoint, method: Literal["score", "chat"], text: str, *args: Any, **kwargs: Any) -> Any:
        """One call on ``endpoint`` in one of its slots, under the deadline."""
        async with endpoint.slot(tokens=await self._tokens(endpoint, text)):
            return await self._bounded(endpoint.backend, call_backend(endpoint.backend, method, *args, **kwargs))

    async def _tokens(self, endpoint: Endpoint, text: str) -> int:
        """Prompt tokens for the token-rate limit, counted off the loop (0 when there is none)."""
        if endpoint.tokens is None:
            return 0
        return await asyncio.to_thread(endpoint.backend.count_tokens, text)

    def _another_call(self) -> bool:
        """Count one more call (an off-format reply asked again) when the budget allows it."""
        if self.max_calls is not None and self._spent >= self.max_calls:
            return False
        self._spend()
        return True

    async def _once(self, key: str, request: dict[str, Any], *, kind: ReplyKind[Reply],
                    make: Callable[[], Awaitable[tuple[Reply | Answered[Reply], str | None]]],
                    owner: ModelBackend | None = None, fingerprint: str | None = None, label: str | None = None,
                    run_id: int | None = None, images: Sequence[KeptImage] = ()) -> Reply:
        """One cached, claimed call: a hit comes from the store (or from another process's claim);
        otherwise ``make()`` runs and its outcome is committed, counted and linked (a failure is
        recorded, then raised as a ModelCallError)."""
        fresh = False
        while True:
            if (hit := await self._hit(key, fresh=fresh, owner=owner)) is not None:
                self.usage.count("cache_hits")
                self.outcomes.link(key, cache_hit=True, label=label, run_id=run_id)
                await self.outcomes.settled()
                return kind.read(hit)
            state, lease = await self._claim(key)
            if state == "mine":
                break
            fresh = True
            if state == "held":
                await self.claims.wait_unclaimed(key)
        reply, problem = await self.outcomes.claimed_call(key, request, kind=kind.name, owner=lease, make=make,
                                                          model=owner, fingerprint=fingerprint, label=label,
                                                          run_id=run_id, images=images)
        if problem is not None:
            raise ModelCallError(problem)
        assert reply is not None, "a call with no reply has a problem"
        return reply

    # -- score calls -------------------------------------------------------------------------
    async def _score_call(self, call: PlannedCall) -> tuple[ScoreResponse | None, str | None, bool]:
        """One planned call not found in the store: ``(reply, error, answered_by_another_process)``.

        The claim is taken inside an endpoint slot, so two processes split a batch between them;
        a process that finds a call claimed gives its slot back while it waits."""
        text = _prompt_text(call.request)
        endpoint = await self.pool.choose(text)
        backend = endpoint.backend
        composite = backend.ascore_with if isinstance(backend, ComposedScore) else None
        fresh = False
        while True:
            if fresh and (hit := await self._hit(call.key, fresh=True)) is not None:
                return ScoreResponse.from_dict(hit), None, True
            async with endpoint.slot(tokens=await self._tokens(endpoint, text)):
                state, owner = await self._claim(call.key)
                if state == "mine":
                    make: Callable[[], Awaitable[tuple[ScoreResponse | Answered[ScoreResponse], str | None]]]
                    if composite is not None:
                        make = lambda: self.steps.composite(backend, composite, call.request)
                    else:
                        make = lambda: self._usable(backend, call.request)
                    resp, error = await self.outcomes.claimed_call(
                        call.key, call.request.to_dict(), kind="score", owner=owner, make=make, model=None,
                        fingerprint=None, label=None, run_id=None, counted=composite is None,
                        link=composite is None,  # a composite's steps are linked themselves
                        images=score_images(call.request))
                    return resp, error, False
            fresh = True
            if state == "held":
                await self.claims.wait_unclaimed(call.key)

    async def _usable(self, backend: ModelBackend, request: ScoreRequest
                      ) -> tuple[ScoreResponse | Answered[ScoreResponse], str | None]:
        """A planned score call's reply and, when it cannot grade, why. A deterministic off-format reply
        is asked once more another way (``retry_of``) when the budget allows: that retry is a call of its
        own, cached and recorded under the key of what it sends, and the answer comes back as
        :class:`Answered` (the planned call's key then points to it, never holds it)."""
        def send(which: ModelBackend) -> Awaitable[ScoreResponse]:
            return self._bounded(which, call_backend(which, "score", request))

        resp = await send(backend)
        problem = score_reply_problem(resp)
        if problem is None or not deterministic(request):
            return resp, problem
        retry = retry_of(backend)
        if retry is None or (self.max_calls is not None and self._spent >= self.max_calls):
            return resp, cannot_grade(problem)
        wider, how = retry
        fingerprint = await afingerprint(wider)
        key = call_key(fingerprint, self.prompt_version, request.to_dict())
        off_format: list[str] = []

        async def make() -> tuple[ScoreResponse, str | None]:
            again = await send(wider)
            later = score_reply_problem(again)
            if later:
                off_format.append(later)
            return again, (cannot_grade(later, how) if later else None)

        try:
            again = await self._once(key, request.to_dict(), kind=SCORE, make=make, owner=wider,
                                     fingerprint=fingerprint, images=score_images(request))
        except BudgetExceeded:  # another call spent the last of the budget meanwhile
            return resp, cannot_grade(problem)
        except ModelCallError as exc:
            why = str(exc) if off_format else cannot_grade(problem, f"{how} (that call failed: {exc})")
            return Answered(None, why, key, resp), None
        return Answered(with_cost_of(again, resp), None, key, resp), None

    async def run(self, calls: Sequence[PlannedCall], progress: Progress | None = None) -> list[CallOutcome]:
        """Answer every call (cache first), in order; raises BudgetExceeded before spending, and the
        first set-up error (after cancelling and recording the calls still running)."""
        await self.afingerprint()
        calls = self.keyed(calls)
        keys = list(dict.fromkeys(c.key for c in calls))
        found = {} if self.refresh or self.store is None else await self._io(self._servable_calls, self.store, keys)
        cached = {k: ScoreResponse.from_dict(v) for k, v in found.items()}
        # a call asked again another way: its retry's stored answer, under the retry's own key
        retried = await self._retried_answers([k for k in keys if k not in cached])
        cached.update({k: ScoreResponse.from_dict(answer) for k, (_, answer) in retried.items()})
        pending = [k for k in keys if k not in cached]
        self._check_budget(len(pending) * calls_per_score(self.model))
        first = {c.key: c for c in reversed(calls) if c.key in pending}
        results: dict[str, tuple[ScoreResponse | None, str | None, bool]] = {}

        async def one(key: str) -> None:
            results[key] = await self._score_call(first[key])
            resp, err, elsewhere = results[key]
            if progress is not None and not elsewhere:  # another process's answer is reported as a hit below
                progress(CallOutcome(first[key], resp, False, err))

        async def in_plan_order() -> None:  # consecutive calls share their prefix in the KV cache
            for key in pending:
                await one(key)

        try:
            async with asyncio.TaskGroup() as group:
                if self.pool.is_embedded:
                    group.create_task(in_plan_order())
                else:
                    for key in pending:
                        group.create_task(one(key))
        except BaseExceptionGroup as failed:
            await self.outcomes.settled()
            raise _first_error(failed) from None
        outcomes = []
        for c in calls:
            if c.key in cached or results[c.key][2]:
                resp = cached.get(c.key) or results[c.key][0]
                self.usage.count("cache_hits")
                self.outcomes.link(retried[c.key][0] if c.key in retried else c.key, cache_hit=True)
                outcome = CallOutcome(c, resp, True)
                if progress is not None:
                    progress(outcome)
            else:
                resp, err, _ = results[c.key]
                outcome = CallOutcome(c, resp, False, err)
            outcomes.append(outcome)
        await self.outcomes.settled()
        return outcomes

    # -- a composite backend's steps (:mod:`veriscale.engine.composite_steps`) ----------------------
    async def sub_chat(self, backend: ModelBackend, messages: list[dict[str, Any]], *, max_tokens: int = 512,
                       temperature: float = 0.0, label: str | None = None) -> ChatResponse:
        """A composite backend's chat step: cached under that backend's own fingerprint, recorded, linked."""
        return await self.steps.sub_chat(backend, messages, max_tokens=max_tokens, temperature=temperature,
                                         label=label)

    async def sub_score(self, backend: ModelBackend, request: ScoreRequest, *, label: str | None = None) -> ScoreResponse:
        """A composite backend's scoring step: cached under that backend's fingerprint, validated, recorded, linked."""
        return await self.steps.sub_score(backend, request, label=label)

    # -- chat calls --------------------------------------------------------------------------
    async def chat(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                   max_tokens: int = 512, temperature: float = 0.0, seed: int | None = None,
                   label: str | None = None, run_id: int | None = None,
                   options: dict[str, Any] | None = None) -> ChatResponse:
        """One chat completion, cached by (messages, tools, parameters, seed); ModelCallError on failure.

        ``run_id`` links the call to that run instead of the gateway's current one (a proxy
        answers many requests at once on one gateway, each its own run). ``options``: more chat
        parameters (``{"stop": ["3"], "top_p": 0.9}``) for a backend that lists them in its
        ``chat_options``; part of the cache key when given."""
        request = {"messages": messages, "tools": tools or [], "max_tokens": max_tokens,
                   "temperature": temperature, "seed": seed}
        if options:  # only then: the keys of calls without options stay what they were
            request["options"] = options

        async def make() -> tuple[ChatResponse, None]:
            text = "\n".join(str(m.get("content") or "") for m in messages)
            return await self._invoke(await self.pool.choose(text), "chat", text, list(messages),
                                      tools=tools, max_tokens=max_tokens, temperature=temperature,
                                      **({"seed": seed} if seed is not None else {}),
                                      **({"options": options} if options else {})), None

        # a chat reply does not depend on how score slots are read: keyed and recorded by the weights alone
        # (no read probe of a chat-only upstream)
        weights = await aweights_fingerprint(self.model)
        return await self._once(call_key(weights, CHAT_KEY_VERSION, request), request, kind=CHAT,
                                make=make, label=label, run_id=run_id, fingerprint=weights)
