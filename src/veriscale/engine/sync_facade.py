"""The synchronous facade over the gateway (:mod:`veriscale.engine.gateway`).

The CLI and the Python API call this; async callers await the :class:`Gateway` itself, or
``await ex.arun(...)`` on their own loop (synchronous calls run through :mod:`veriscale.engine.sync_edge`)::

    ex = CallExecutor(model, store, prompt_version="v3", max_calls=100)
    outcomes = ex.run([PlannedCall(request=req) for req in requests], progress=lambda o: bar.advance())
    outcomes = await ex.arun(calls)
    reply = ex.chat(messages, tools=tools)
    ex.usage.model_calls, ex.usage.cache_hits

The embedded model runs calls one by one in plan order (its KV cache reuses the shared prefix
of consecutive calls); HTTP backends run up to ``concurrency`` calls at once per endpoint
(one limit per endpoint per process: :mod:`veriscale.engine.routing`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from veriscale.engine import sync_edge
from veriscale.engine.gateway import CallOutcome, Gateway, PlannedCall, Progress
from veriscale.engine.routing import EndpointPool
from veriscale.engine.store import Store
from veriscale.models.abilities import Calibrated
from veriscale.engine.usage import Estimate, Usage
from veriscale.models.base import ChatResponse, ModelBackend

__all__ = ["CallExecutor", "CallOutcome", "Estimate", "PlannedCall", "Usage"]


class CallExecutor:
    """Blocking access to one :class:`Gateway` (same arguments)."""

    def __init__(self, model: ModelBackend | EndpointPool | Sequence[ModelBackend], store: Store | None, *,
                 prompt_version: str, refresh: bool = False, max_calls: int | None = None,
                 concurrency: int = 4, on_done: Progress | None = None, run_id: int | None = None,
                 deadline_s: float | None = None, rpm: int | None = None, tpm: int | None = None,
                 lease_s: float | None = None) -> None:
        self.gateway = Gateway(model, store, prompt_version=prompt_version, refresh=refresh, max_calls=max_calls,
                               concurrency=concurrency, run_id=run_id, deadline_s=deadline_s, rpm=rpm, tpm=tpm,
                               **({"lease_s": lease_s} if lease_s is not None else {}))
        self.on_done = on_done  # progress used when run() is given none

    # the gateway's state, for callers that read it
    model = property(lambda self: self.gateway.model)
    store = property(lambda self: self.gateway.store)
    usage = property(lambda self: self.gateway.usage)
    prompt_version = property(lambda self: self.gateway.prompt_version)

    def fingerprint(self) -> str:
        return self.gateway.fingerprint()

    def calibration_key(self) -> str:
        """What τ is stored under: the weights, and the read where it is not exact and prefilled
        (``calibration_key()`` of the backend; its fingerprint for a backend without one)."""
        model = self.gateway.model
        return model.calibration_key() if isinstance(model, Calibrated) else self.gateway.fingerprint()

    def keyed(self, calls: Sequence[PlannedCall]) -> list[PlannedCall]:
        return self.gateway.keyed(calls)

    def estimate(self, calls: Sequence[PlannedCall]) -> Estimate:
        return self.gateway.estimate(calls)

    def run(self, calls: Sequence[PlannedCall], progress: Progress | None = None) -> list[CallOutcome]:
        """Answer every call (cache first), in order; raises BudgetExceeded before spending."""
        return sync_edge.run(self.gateway.run(calls, progress=progress or self.on_done))

    async def arun(self, calls: Sequence[PlannedCall], progress: Progress | None = None) -> list[CallOutcome]:
        """:meth:`run` awaited on the caller's loop."""
        return await self.gateway.run(calls, progress=progress or self.on_done)

    def chat(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResponse:
        """One cached chat completion (see :meth:`Gateway.chat`)."""
        return sync_edge.run(self.gateway.chat(messages, **kwargs))
