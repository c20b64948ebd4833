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
- ``ReadPlanned`` (``read_plan()``, how a slot is read: a ``models.read_strategy.ReadPlan``, exact,
  top-k or sampled, probed once for a server; else a top-k read where the backend shows ``TopK``):
  every shipped backend.
- ``JointReads`` (``supports_joint()``; else every criterion is its own call): embedded, the
  OpenAI-compatible servers whose read probe found a joint format.
- ``ServerTokenizer`` (``token_spans()`` and ``tokenizer_requests()``; else ``count_tokens`` and no
  tokenizer requests): the OpenAI-compatible servers, two-stage.
- ``ChatOptions`` (``chat_options``, the sampling options ``chat`` takes; else none).
- ``TopK`` (``top_logprobs``, the most labels one read shows; else every label is read).
- ``StagedScorer`` (``scorer``, the backend that reads a two-stage model's slot).
- ``SharedEndpoint`` (``limit_key``: the server and model its calls count against, so every gateway of a
  process shares one set of limits for it; else the backend object is its own endpoint): the HTTP
  backends and embedded. ``OwnConcurrency`` (``concurrency``: the endpoint's own cap; else the
  ``concurrency`` setting). ``Calibrated`` (``calibration_key()``, what τ is stored under; else the
  fingerprint): OpenAI-compatible.
- ``ProbedState`` (``probed_state()`` / ``adopt_probed_state(state)``: what a server backend learned by
  probing, handed to a copy in another process; else the copy probes for itself): OpenAI-compatible.

An ability that costs a request to find out (whether a server reads joint prompts runs its read
probe) is a method, never a property: ``isinstance`` against these Protocols on Python 3.11 reads
each member with ``hasattr``, which would run a property's probe from wherever the check happens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from veriscale.data.token_spans import TokenSpans
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


@runtime_checkable
class ReadPlanned(Protocol):
    def read_plan(self) -> Any: ...


@runtime_checkable
class JointReads(Protocol):
    def supports_joint(self) -> bool: ...


@runtime_checkable
class ServerTokenizer(Protocol):
    def token_spans(self) -> TokenSpans | None: ...

    def tokenizer_requests(self) -> int: ...


@runtime_checkable
class ChatOptions(Protocol):
    chat_options: frozenset[str]


@runtime_checkable
class TopK(Protocol):
    top_logprobs: int


@runtime_checkable
class StagedScorer(Protocol):
    scorer: ModelBackend


@runtime_checkable
class SharedEndpoint(Protocol):
    limit_key: str


@runtime_checkable
class OwnConcurrency(Protocol):
    concurrency: int | None


@runtime_checkable
class Calibrated(Protocol):
    def calibration_key(self) -> str: ...


def endpoint_key(backend: object) -> str | None:
    """The endpoint ``backend``'s calls count against (None: the object is its own endpoint)."""
    return str(backend.limit_key) if isinstance(backend, SharedEndpoint) else None


def own_concurrency(backend: object) -> int | None:
    """The endpoint's own cap on calls at once (None: the ``concurrency`` setting holds)."""
    cap = backend.concurrency if isinstance(backend, OwnConcurrency) else None
    return cap if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else None


@runtime_checkable
class ProbedState(Protocol):
    def probed_state(self) -> dict[str, Any]: ...

    def adopt_probed_state(self, state: dict[str, Any]) -> None: ...


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


def reads_joint(backend: object) -> bool:
    """Whether ``backend`` reads a joint request's slots (a server asks its read probe, once)."""
    return isinstance(backend, JointReads) and bool(backend.supports_joint())


def chat_options(backend: object) -> frozenset[str]:
    """The sampling options ``backend.chat`` takes beyond the contract's (none where it lists none)."""
    return frozenset(backend.chat_options) if isinstance(backend, ChatOptions) else frozenset()
