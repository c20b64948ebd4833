"""The steps of a composite backend (two-stage: a reasoner's chat, then a scorer's score) as
gateway calls of their own: each cached under its own backend's fingerprint, validated, recorded
and linked to the run, like any call. The :class:`veriscale.engine.gateway.Gateway` holds a
:class:`CompositeSteps` over itself (what it needs of the gateway: :class:`StepGateway`)::

    steps = CompositeSteps(gateway)
    reply, problem = await steps.composite(backend, backend.ascore_with, request)

    async def ascore_with(self, request, calls):          # in the composite backend
        analysis = await calls.chat(self.reasoner, messages, max_tokens=256)
        return await calls.score(self.scorer, scorer_request)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

from veriscale.engine.backend_calls import afingerprint, call_backend
from veriscale.engine.replies import (
    CHAT,
    SCORE,
    Answered,
    Reply,
    ReplyKind,
    score_reply_problem,
    usable_reply,
)
from veriscale.engine.routing import Endpoint, endpoint_limits
from veriscale.engine.call_outcomes import score_images
from veriscale.engine.store import CHAT_KEY_VERSION, KeptImage, call_key
from veriscale.models.base import (
    ChatResponse,
    ModelBackend,
    ScoreRequest,
    ScoreResponse,
)

_T = TypeVar("_T")

#: A composite backend's ``ascore_with``: the request, and the :class:`SubCalls` its steps go through.
Composite = Callable[[ScoreRequest, "SubCalls"], Awaitable[ScoreResponse]]


class StepGateway(Protocol):
    """What :class:`CompositeSteps` needs of the gateway (:class:`veriscale.engine.gateway.Gateway`)."""

    @property
    def concurrency(self) -> int: ...

    @property
    def prompt_version(self) -> str: ...

    async def _once(self, key: str, request: dict[str, Any], *, kind: ReplyKind[Reply],
                    make: Callable[[], Awaitable[tuple[Reply | Answered[Reply], str | None]]],
                    owner: ModelBackend | None = None, fingerprint: str | None = None, label: str | None = None,
                    run_id: int | None = None, images: Sequence[KeptImage] = ()) -> Reply: ...

    def _another_call(self) -> bool: ...

    async def _bounded(self, backend: ModelBackend, work: Awaitable[_T]) -> _T: ...


class StepCalls(Protocol):
    """What :class:`SubCalls` asks of the gateway's side (:class:`CompositeSteps` provides it)."""

    async def sub_chat(self, backend: ModelBackend, messages: list[dict[str, Any]], *, max_tokens: int = ...,
                       temperature: float = ..., label: str | None = ...) -> ChatResponse: ...

    async def sub_score(self, backend: ModelBackend, request: ScoreRequest, *,
                        label: str | None = ...) -> ScoreResponse: ...


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
    """The gateway's side of :class:`SubCalls`: each step a cached, claimed call of ``gateway``."""

    def __init__(self, gateway: StepGateway) -> None:
        self._gateway = gateway

    def _sub_endpoint(self, backend: ModelBackend) -> Endpoint:
        return Endpoint(backend, endpoint_limits(backend, concurrency=self._gateway.concurrency))

    async def sub_chat(self, backend: ModelBackend, messages: list[dict[str, Any]], *, max_tokens: int = 512,
                       temperature: float = 0.0, label: str | None = None) -> ChatResponse:
        """A composite backend's chat step: cached under that backend's own fingerprint, recorded, linked."""
        request = {"messages": messages, "tools": [], "max_tokens": max_tokens, "temperature": temperature, "seed": None}
        fingerprint = await afingerprint(backend)
        endpoint = self._sub_endpoint(backend)

        async def make() -> tuple[ChatResponse, None]:
            async with endpoint.slot():
                reply: ChatResponse = await call_backend(backend, "chat", messages, max_tokens=max_tokens,
                                                         temperature=temperature)
                return reply, None

        return await self._gateway._once(call_key(fingerprint, CHAT_KEY_VERSION, request), request, kind=CHAT,
                                         owner=backend, fingerprint=fingerprint, label=label, make=make)

    async def sub_score(self, backend: ModelBackend, request: ScoreRequest, *, label: str | None = None) -> ScoreResponse:
        """A composite backend's scoring step: cached under that backend's fingerprint, validated, recorded, linked."""
        fingerprint = await afingerprint(backend)
        endpoint = self._sub_endpoint(backend)

        async def send(which: ModelBackend) -> ScoreResponse:
            async with endpoint.slot():
                reply: ScoreResponse = await call_backend(which, "score", request)
                return reply

        async def make() -> tuple[ScoreResponse, str | None]:
            return await usable_reply(backend, request, send, another_call=self._gateway._another_call)

        return await self._gateway._once(call_key(fingerprint, self._gateway.prompt_version, request.to_dict()),
                                         request.to_dict(), kind=SCORE, owner=backend, fingerprint=fingerprint,
                                         label=label, make=make, images=score_images(request))

    async def composite(self, backend: ModelBackend, composite: Composite, request: ScoreRequest
                        ) -> tuple[ScoreResponse, str | None]:
        """A planned call on a composite backend: its ``ascore_with`` under the deadline, its steps through this."""
        resp = await self._gateway._bounded(backend, composite(request, SubCalls(self)))
        return resp, score_reply_problem(resp)


__all__ = ["CompositeSteps", "StepCalls", "StepGateway", "SubCalls"]
