"""The gateway's side of the store: call keys, the stored answers it may serve, and its claims.

:class:`veriscale.engine.gateway.Gateway` is a :class:`GatewayCache` (its ``__init__`` sets the
attributes below). A key is the model's fingerprint, the prompt version and the request; a stored
answer is served only when it names the model's latest weights (:mod:`veriscale.models.weights`),
and under ``refresh`` only when it was written after the gateway opened; a key is claimed before
its call is sent (:mod:`veriscale.engine.call_claims`). Every store operation runs on the store's
writer thread (``_io``), so the gateway's loop never waits on SQLite::

    gw.keyed(calls)                         # each PlannedCall's key, set once
    gw.estimate(calls)                      # Estimate: calls the store cannot answer, their prompt tokens
    hit = await gw._hit(key)                # the stored answer, or None (older weights: asked again)
    state, owner = await gw._claim(key)     # "mine", "done" or "held"
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from veriscale.engine.backend_calls import afingerprint
from veriscale.engine.call_claims import CallClaims
from veriscale.engine.planned import PlannedCall
from veriscale.engine.replies import retried_key
from veriscale.engine.routing import EndpointPool
from veriscale.engine.store import Store, call_key
from veriscale.engine.store_writer import landed
from veriscale.engine.usage import Estimate
from veriscale.models import weights
from veriscale.models.base import ModelBackend, ScoreRequest

__all__ = ["GatewayCache"]

_T = TypeVar("_T")


def _prompt_text(request: ScoreRequest) -> str:
    return "\n".join(m.content for m in request.messages) + request.prefill


class GatewayCache:
    """Keys, stored answers and claims of one gateway's calls (the gateway sets the attributes below)."""

    pool: EndpointPool
    model: ModelBackend
    store: Store | None
    prompt_version: str
    refresh: bool
    claims: CallClaims
    _fingerprint: str | None
    _opened_at: float  # a refreshing gateway takes answers written after this
    _stale: set[str]  # keys whose stored answer names older weights: asked again

    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = self.model.fingerprint()
            weights.note_fingerprint(self.store, self.model.uri, self._fingerprint)  # new weights: a note
        return self._fingerprint

    async def afingerprint(self) -> str:
        """:meth:`fingerprint`, off the loop (a file hash, a model-id probe over the async client)."""
        if self._fingerprint is None:
            self._fingerprint = await afingerprint(self.model)
            if self.store is not None:
                await self._io(weights.note_fingerprint, self.store, self.model.uri, self._fingerprint)
        return self._fingerprint

    def keyed(self, calls: Sequence[PlannedCall]) -> list[PlannedCall]:
        for c in calls:
            if not c.key:
                c.key = call_key(self.fingerprint(), self.prompt_version, c.request.to_dict())
        return list(calls)

    def _cached(self, key: str) -> dict[str, Any] | None:
        if self.refresh or self.store is None:
            return None
        hit = self.store.get_call(key)
        return hit if weights.serves(self.store, self.model.uri, hit) else None

    async def _io(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """A store operation on the store's writer thread; it lands even if the caller is cancelled."""
        assert self.store is not None, "a store operation on a gateway without a store"
        return await landed(self.store.submit(fn, *args, **kwargs))

    async def _hit(self, key: str, *, fresh: bool = False, owner: ModelBackend | None = None) -> dict[str, Any] | None:
        """The stored answer of ``key`` (``fresh``: also under refresh, if written after this gateway opened);
        none when it names other weights than ``owner``'s latest (:mod:`veriscale.models.weights`)."""
        if self.store is None or (self.refresh and not fresh):
            return None
        if self.refresh:
            record = await self._io(self.store.call, key)
            if record is None or not (record["status"] == "ok" and record["created_at"] >= self._opened_at):
                return None
            response: dict[str, Any] | None = record["response"]
            return response
        hit = await self._io(self.store.get_call, key)
        if hit is not None and not await self._io(weights.serves, self.store, (owner or self.model).uri, hit):
            self._stale.add(key)
            return None
        return hit

    def _servable_calls(self, store: Store, keys: list[str]) -> dict[str, dict[str, Any]]:
        """The stored answers of ``keys`` that name the model's latest weights (on the writer thread)."""
        found = store.get_calls(keys)
        servable = {k: v for k, v in found.items() if weights.serves(store, self.model.uri, v)}
        self._stale.update(set(found) - set(servable))
        return servable

    async def _claim(self, key: str) -> tuple[str, str | None]:
        """Claim ``key``; under refresh, or when its stored answer names older weights, only an
        answer written after this gateway opened counts as done."""
        fresh = self.refresh or key in self._stale
        return await self.claims.claim(key, fresh_after=self._opened_at if fresh else None)

    def estimate(self, calls: Sequence[PlannedCall]) -> Estimate:
        """Count calls the store cannot answer and the prompt tokens they would send."""
        calls = self.keyed(calls)
        pending = [c for c in calls if self._cached(c.key) is None]
        tokens = sum(self.model.count_tokens(_prompt_text(c.request)) for c in pending)
        return Estimate(len(pending), len(calls) - len(pending), tokens, self.pool.is_embedded)

    async def _retried_answers(self, keys: list[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        """Of ``keys`` (not answered in the store), those whose off-format reply was asked again and whose
        retry's answer is stored: key -> (the retry's key, its answer). On the writer thread's turn."""
        if self.store is None or self.refresh or not keys:
            return {}

        store = self.store

        def read() -> dict[str, tuple[str, dict[str, Any]]]:
            pointers = {k: r for k in keys if (r := store.get_meta(retried_key(k)))}
            found = self._servable_calls(store, list(set(pointers.values()))) if pointers else {}
            return {k: (r, found[r]) for k, r in pointers.items() if r in found}

        return await self._io(read)
