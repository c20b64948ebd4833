"""What happens to a call the gateway sends: its outcome (ok, failed with its reason, cancelled)
recorded in the store as it completes, counted in the usage, and linked to the run. The
:class:`veriscale.engine.gateway.Gateway` holds an :class:`OutcomeRecorder`, made with exactly
what recording needs::

    outcomes = OutcomeRecorder(store, usage, claims, model=backend, embedded=False, run_id=run,
                               prompt_version="v3", fingerprint=gw.fingerprint, io=gw._io, spend=gw._spend)
    reply, problem = await outcomes.claimed_call(key, request, kind="chat", owner=lease, make=make, ...)
    # every path (a reply, a failure, a cancellation, an error raised) leaves exactly one record
    outcomes.link(key, cache_hit=True)        # a hit: linked to the run
    await outcomes.settled()                  # the writes handed to the store so far have landed

A call answered by another request (``replies.Answered``: an off-format reply asked again another
way, that retry recorded under its own key) leaves no record under its own key, never an ok one
with another request's answer: the store keeps a pointer to the retry's key instead (its meta
``replies.retried_key(key)``), which a rerun follows to the stored answer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, replace
from typing import Any, Protocol, TypedDict, TypeVar

from veriscale.engine.call_claims import CallClaims
from veriscale.engine.replies import Answered, Reply, retried_key
from veriscale.engine.run_scope import current_run_id
from veriscale.engine.store import CHAT_KEY_VERSION, KeptImage, Store
from veriscale.engine.store_writer import landed
from veriscale.engine.usage import CallTokens, GatewayUsage
from veriscale.errors import BudgetExceeded, ModelCallError, worded
from veriscale.models import weights
from veriscale.models.base import ModelBackend, ScoreRequest

#: A write handed to the store's writer thread (None: there is no store).
Written = concurrent.futures.Future[Any] | None


_T = TypeVar("_T")




def score_images(request: ScoreRequest) -> tuple[KeptImage, ...]:
    """The images a score request sends, in order (none for a text-only request), each label prefixed by
    the prompt section the prompt placed it in (``ImagePart.section``: "First response: frame1.png"), so
    two runs' frames of the same names stay apart where they are shown."""
    found: list[KeptImage] = []
    for m in request.messages:
        for part in m.parts:
            if not isinstance(part, str):
                found.append(replace(part, label=f"{part.section}: {part.label}") if part.section and part.label
                             else part)
    return tuple(found)


class StoreIO(Protocol):
    """A store operation run on the store's writer thread, awaited (the gateway's ``_io``)."""

    def __call__(self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> Awaitable[_T]: ...


class _Recorded(TypedDict):
    """What every record of one sent call shares (see :meth:`OutcomeRecorder.record`)."""

    kind: str
    model: ModelBackend | None
    counted: bool
    owner: str | None
    fingerprint: str | None


class OutcomeRecorder:
    """Records a sent call's outcome in ``store``, counts it in ``usage`` and links it to the run.

    ``model``: the gateway's backend (a call made for another backend names that one); ``embedded``:
    whether the gateway's model is embedded (how a reply's cached tokens are read); ``run_id``: the
    gateway's own run, else the caller's current run; ``fingerprint``: the gateway's model
    fingerprint (asked only when a record needs it); ``io``: a store operation on the writer
    thread; ``spend``: count one call against the budget (raises BudgetExceeded when it is spent)."""

    def __init__(self, store: Store | None, usage: GatewayUsage, claims: CallClaims, *, model: ModelBackend,
                 embedded: bool, run_id: int | None, prompt_version: str, fingerprint: Callable[[], str],
                 io: StoreIO, spend: Callable[[], None]) -> None:
        self.store = store
        self.usage = usage
        self.claims = claims
        self.model = model
        self.embedded = embedded
        self.run_id = run_id
        self.prompt_version = prompt_version
        self.fingerprint = fingerprint
        self.io = io
        self.spend = spend

    def link(self, key: str, *, cache_hit: bool, label: str | None = None, run_id: int | None = None) -> None:
        if run_id is None:  # the gateway's own run if it was made for one, else the caller's current run
            run_id = self.run_id if self.run_id is not None else current_run_id()
        if self.store is not None and run_id is not None:
            self.store.submit(self.store.link_call, run_id, key, cache_hit=cache_hit, label=label)

    async def settled(self) -> None:
        """Wait until the writes handed to the store so far have landed."""
        if self.store is not None:
            await self.io(lambda: None)

    def record(self, key: str, request: dict[str, Any], *, kind: str, response: dict[str, Any] | None,
               error: str | None, latency_s: float | None, tokens: CallTokens | None = None,
               model: ModelBackend | None = None, counted: bool = True,
               owner: str | None = None, fingerprint: str | None = None, cancelled: bool = False) -> Written:
        """Hand one outcome to the store's writer (and drop ``owner``'s claim); count it
        (``counted=False``: a composite's own record, whose steps counted). Returns the write's future.
        ``tokens``: what the reply cost (sent, processed, cached: None where the model did not say)."""
        written = None
        tokens = tokens or CallTokens()
        if self.store is not None:
            who = model or self.model
            self.store.submit(weights.note_reply, self.store, who.uri, response)  # a reply naming new weights: a note
            written = self.store.submit(
                self.store.finish_call, key, owner, model=who.uri,
                fingerprint=fingerprint or (who.fingerprint() if model else self.fingerprint()),
                prompt_version=self.prompt_version if kind == "score" else CHAT_KEY_VERSION,
                request=request, status="cancelled" if cancelled else "failed" if error else "ok", response=response,
                error=error, latency_s=latency_s, kind=kind, prompt_tokens=tokens.sent,
                processed_tokens=tokens.processed, cached_tokens=tokens.cached, completion_tokens=tokens.completion)
        if counted:
            if cancelled:
                self.usage.count("cancelled_calls")
            elif error:
                self.usage.count("failed_calls")
            else:
                self.usage.add_call(tokens, latency_s or 0.0)
        return written

    @staticmethod
    async def committed(written: Written) -> None:
        if written is not None:
            await landed(written)

    def _embedded(self, model: ModelBackend | None) -> bool:
        """Whether the reply came from an embedded model (``model``'s, else the gateway's)."""
        return bool(getattr(model, "is_embedded", False) if model is not None else self.embedded)

    async def claimed_call(self, key: str, request: dict[str, Any], *, kind: str, owner: str | None,
                           make: Callable[[], Awaitable[tuple[Reply | Answered[Reply], str | None]]],
                           model: ModelBackend | None, fingerprint: str | None, label: str | None,
                           run_id: int | None, counted: bool = True, link: bool = True,
                           images: Sequence[KeptImage] = ()) -> tuple[Reply | None, str | None]:
        """Send a claimed call (``make()`` gives the reply and its problem) and record its outcome,
        whatever it is: ok; failed with its reason; cancelled; or failed by an error that is raised.
        ``images``: those the request sends, kept in the store by digest and linked to ``key`` (a
        request's record names each only by its digest), on the writer thread before the outcome."""
        try:
            if counted:
                self.spend()
        except BudgetExceeded:
            if owner is not None and self.store is not None:
                self.store.submit(self.store.release_lease, key, owner)
            raise
        if images and self.store is not None:
            self.store.submit(self.store.put_images, images, key)
        started = time.perf_counter()
        renewer = asyncio.ensure_future(self.claims.renew(key, owner))
        common = _Recorded(kind=kind, model=model, counted=counted, owner=owner, fingerprint=fingerprint)
        try:
            reply, problem = await make()
        except ModelCallError as exc:
            error = worded(exc.template)  # reads with Python names; the CLI names flags
            await self.committed(self.record(key, request, response=None, error=error,
                                             latency_s=time.perf_counter() - started, **common))
            self.link(key, cache_hit=False, label=label, run_id=run_id) if link else None
            return None, error
        except asyncio.CancelledError:
            self.record(key, request, response=None, error="cancelled before it finished (rerun to ask again)",
                        latency_s=time.perf_counter() - started, cancelled=True, **common)
            self.link(key, cache_hit=False, label=label, run_id=run_id) if link else None
            raise
        except BaseException as exc:
            template = getattr(exc, "template", None) or f"{type(exc).__name__}: {exc}"
            written = self.record(key, request, response=None, error=worded(template),
                                  latency_s=time.perf_counter() - started, **common)
            self.link(key, cache_hit=False, label=label, run_id=run_id) if link else None
            await self.committed(written)
            raise
        finally:
            renewer.cancel()
        if isinstance(reply, Answered):
            return await self._answered_elsewhere(key, owner, reply, model=model, counted=counted)
        latency = getattr(reply, "latency_s", 0.0) or time.perf_counter() - started
        written = self.record(key, request, response=asdict(reply), error=problem, latency_s=latency,
                              tokens=CallTokens.of(reply, embedded=self._embedded(model)), **common)
        self.link(key, cache_hit=False, label=label, run_id=run_id) if link else None
        await self.committed(written)
        return (None if problem else reply), problem

    async def _answered_elsewhere(self, key: str, owner: str | None, answered: Answered[Reply], *,
                                  model: ModelBackend | None, counted: bool) -> tuple[Reply | None, str | None]:
        """The planned call ``key`` was answered by its retry, recorded under the retry's own key: its
        own (off-format) reply is counted, its claim dropped, and the store points ``key`` to the retry's."""
        if counted:
            self.usage.add_call(CallTokens.of(answered.first, embedded=self._embedded(model)),
                                getattr(answered.first, "latency_s", 0.0) or 0.0)
        written = None
        if self.store is not None:
            self.store.submit(self.store.set_meta, retried_key(key), answered.key)
            written = self.store.submit(self.store.release_lease, key, owner) if owner is not None else \
                self.store.submit(lambda: None)
        await self.committed(written)
        return (None if answered.problem else answered.reply), answered.problem


__all__ = ["OutcomeRecorder", "StoreIO", "Written", "score_images"]
