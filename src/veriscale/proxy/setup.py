"""Build the proxy at server start, and refuse a setup that cannot work before any request.

    service = open_proxy(settings, server_model, store)   # UserError: N = 0, no logprobs, ...

The verifier is probed once with one score call through the gateway (cached in the store, so
a restart costs nothing): a model that returns no logprobs cannot score, and the proxy says so
instead of failing every request later. A ``[proxy] budget`` too small for one comparison of the
pick is refused here too, naming the smallest that works (``veriscale.proxy.budget_plan``).
"""

from __future__ import annotations

from typing import Any

from veriscale.engine.sync_facade import CallExecutor, PlannedCall
from veriscale.engine.store import Store
from veriscale.errors import ModelCallError, UserError
from veriscale.proxy.budget_plan import refuse_if_too_small
from veriscale.proxy.fan_out import UpstreamPools
from veriscale.proxy.proxied_request import ProxyService
from veriscale.proxy.settings import ProxySettings
from veriscale.verify.prompts import probe_request
from veriscale.verify.scale import parse_scale


def require_logprobs(backend: Any, store: Store | None) -> None:
    probe = probe_request(parse_scale("letters"))
    try:
        (outcome,) = CallExecutor(backend, store, prompt_version="proxy-check").run([PlannedCall(probe)])
    except UserError as exc:
        raise UserError(f"the proxy's verifier {backend.uri} failed its probe for logprobs ({exc}): fix what that says, "
                        "or set [proxy] verifier to a reachable model whose server returns logprobs") from None
    if outcome.error:
        raise UserError(f"the proxy's verifier {backend.uri} failed its probe ({outcome.error}): start it, or "
                        "set [proxy] verifier to a reachable model with logprobs")


def open_proxy(settings: ProxySettings, server_model: Any, store: Store, *, load=None) -> ProxyService:
    """The service behind the proxy routes: upstream pools, the checked verifier."""
    from veriscale.models.uri import load_backend

    if settings.n_total < 1:
        raise UserError("the proxy needs at least one candidate: give [[proxy.candidates]] n >= 1")
    verifier = server_model if settings.verifier is None else (load or load_backend)(settings.verifier)
    try:
        require_logprobs(verifier, store)
    except ModelCallError as exc:
        raise UserError(f"the proxy's verifier {verifier.uri} failed its probe ({exc}): check it is up") from None
    if settings.budget is not None:
        from veriscale.verify.reward import Verifier

        refuse_if_too_small(settings, Verifier(verifier, store=store, criteria=settings.criteria, **{
            k: v for k, v in settings.injection.items() if k != "injection_policy"}))
    return ProxyService(UpstreamPools.open(settings, store, load=load), verifier, settings, store)
