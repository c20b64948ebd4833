"""The steps of a composite backend (two-stage: a reasoner's chat, then a scorer's score) as
gateway calls of their own: each cached under its own backend's fingerprint, validated, recorded
and linked to the run, like any call. :class:`Gateway` is a :class:`CompositeSteps`::

    async def ascore_with(self, request, calls):          # in the composite backend
        analysis = await calls.chat(self.reasoner, messages, max_tokens=256)
        return await calls.score(self.scorer, scorer_request)
"""

from __future__ import annotations

from typing import Any, Protocol

from veriscale.engine.backend_calls import afingerprint, call_backend
from veriscale.engine.replies import score_reply_problem, usable_reply
from veriscale.engine.routing import Endpoint, endpoint_limits
from veriscale.engine.store import CHAT_KEY_VERSION, call_key
from veriscale.models.base import ChatResponse, ModelBackend, ScoreRequest, ScoreResponse


class StepCalls(Protocol):
    """What :class:`SubCalls` asks of the gateway (:class:`CompositeSteps` provides it)."""

    async def sub_chat(self, backend: ModelBackend, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResponse: ...

    async def sub_score(self, backend: ModelBackend, request: ScoreRequest, **kwargs: Any) -> ScoreResponse: ...



class SubCalls:
    """What a composite backend (two-stage) gets to make its steps as gateway calls::

        async def ascore_with(self, request, calls):
            analysis = await calls.chat(self.reasoner, messages, max_tokens=256)
            return await calls.score(self.scorer, scorer_request)
    """

    def __init__(self, gateway: StepCalls) -> None:
        self._gateway = gateway

    async def chat(self, backend: ModelBackend, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResponse:
        return await self._gateway.sub_chat(backend, messages, **kwargs)

    async def score(self, backend: ModelBackend, request: ScoreRequest, **kwargs: Any) -> ScoreResponse:
        return await self._gateway.sub_score(backend, request, **kwargs)


class CompositeSteps:
    """The gateway's side of :class:`SubCalls` (mixed into :class:`veriscale.engine.gateway.Gateway`)."""

    def _sub_endpoint(self, backend: ModelBackend) -> Endpoint:
        return Endpoint(backend, endpoint_limits(backend, concurrency=self.concurrency))

    async def sub_chat(self, backend: ModelBackend, messages: list[dict[str, Any]], *, max_tokens: int = 512,
                       temperature: float = 0.0, label: str | None = None) -> ChatResponse:
        """A composite backend's chat step: cached under that backend's own fingerprint, recorded, linked."""
        request = {"messages": messages, "tools": [], "max_tokens": max_tokens, "temperature": temperature, "seed": None}
        fingerprint = await afingerprint(backend)
        endpoint = self._sub_endpoint(backend)

        async def make() -> tuple[ChatResponse, None]:
            async with endpoint.slot():
                return await call_backend(backend, "chat", messages, max_tokens=max_tokens, temperature=temperature), None

        return await self._once(call_key(fingerprint, CHAT_KEY_VERSION, request), request, kind="chat",
                                owner=backend, fingerprint=fingerprint, label=label, make=make)

    async def sub_score(self, backend: ModelBackend, request: ScoreRequest, *, label: str | None = None) -> ScoreResponse:
        """A composite backend's scoring step: cached under that backend's fingerprint, validated, recorded, linked."""
        fingerprint = await afingerprint(backend)
        endpoint = self._sub_endpoint(backend)

        async def send(which: ModelBackend) -> ScoreResponse:
            async with endpoint.slot():
                return await call_backend(which, "score", request)

        return await self._once(call_key(fingerprint, self.prompt_version, request.to_dict()), request.to_dict(),
                                kind="score", owner=backend, fingerprint=fingerprint, label=label,
                                make=lambda: usable_reply(backend, request, send, another_call=self._another_call))

    async def _composite(self, backend: ModelBackend, composite: Any, request: ScoreRequest
                         ) -> tuple[ScoreResponse, str | None]:
        resp = await self._bounded(backend, composite(request, SubCalls(self)))
        return resp, score_reply_problem(resp)


__all__ = ["CompositeSteps", "SubCalls"]
