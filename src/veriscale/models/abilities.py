"""What a backend may offer beyond :class:`veriscale.models.base.ModelBackend`, each ability a typed
Protocol: the one place that lists them, checked with ``isinstance`` instead of ``getattr`` probes.

    if isinstance(backend, ComposedScore):      # a two-stage model: its steps are gateway calls
        await backend.ascore_with(request, steps)
    if isinstance(backend, WiderRetry):         # a server read that can ask again with a wider top-k
        wider = backend.retry_variant()

Every ability is optional; a backend that lacks one gets the default behaviour named on it. The
abilities and who has them:

- ``NativeScore`` / ``NativeChat`` (``ascore``/``achat`` on the running loop; else the blocking
  method runs in a cancellable worker): the HTTP backends.
- ``ComposedScore`` (``ascore_with`` and ``calls_per_score``; else one call a score): two-stage.
- ``WiderRetry`` (``retry_variant``; else an off-format reply is not asked again): OpenAI-compatible.
- ``AsyncIdentity`` / ``WeightsIdentity`` (``afingerprint`` / ``aweights_fingerprint`` over the async
  client; else ``fingerprint`` in a thread): the HTTP backends.
- ``AsyncLabelCheck`` (``asingle_token_labels``; else ``single_token_labels`` in a thread).
- ``Closable`` (``aclose``; else ``close``, else nothing): :func:`veriscale.models.base.aclose_backend`.

Attributes a server backend computes lazily (``supports_joint`` runs a read probe, ``top_logprobs``,
``token_spans``) stay plain attributes read where used: ``isinstance`` on Python 3.11 would evaluate
a property while it checks, sending that probe from the event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from veriscale.models.base import ChatResponse, ModelBackend, ScoreRequest, ScoreResponse


@runtime_checkable
class NativeScore(Protocol):
    async def ascore(self, request: ScoreRequest) -> ScoreResponse: ...


@runtime_checkable
class NativeChat(Protocol):
    async def achat(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResponse: ...


@runtime_checkable
class ComposedScore(Protocol):
    """A score made of steps the gateway runs as calls of their own (``calls``: its sub-call door)."""

    calls_per_score: int

    async def ascore_with(self, request: ScoreRequest, calls: Any) -> ScoreResponse: ...


@runtime_checkable
class WiderRetry(Protocol):
    def retry_variant(self) -> ModelBackend | None: ...


@runtime_checkable
class AsyncIdentity(Protocol):
    async def afingerprint(self) -> str: ...


@runtime_checkable
class WeightsIdentity(Protocol):
    async def aweights_fingerprint(self) -> str: ...


@runtime_checkable
class AsyncLabelCheck(Protocol):
    async def asingle_token_labels(self, labels: tuple[str, ...]) -> list[str]: ...


@runtime_checkable
class Closable(Protocol):
    async def aclose(self) -> None: ...


async def aclose_backend(backend: object) -> None:
    """Close ``backend`` (its ``aclose()``, else its ``close()``; nothing when it has neither)."""
    if isinstance(backend, Closable):
        await backend.aclose()
    else:
        close = getattr(backend, "close", None)  # a blocking close(): nothing to await
        if callable(close):
            close()


def calls_per_score(backend: object) -> int:
    """Model calls one score of ``backend`` spends (a composed score spends its steps)."""
    return backend.calls_per_score if isinstance(backend, ComposedScore) else 1
