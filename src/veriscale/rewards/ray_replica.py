"""The replicas of a Ray reward pool (:mod:`veriscale.rewards.ray_pool`): what each one builds its
verifier from, and the actor body that rewards a batch with it::

    spec = replica_spec(rewarder)                  # the model URIs and resolved settings of a BatchRewarder
    ray.remote(RewardReplica).remote(spec, holder)  # a verifier of its own, its endpoint slots at the desk

A replica answers ``("ok", RewardBatch)`` or ``("error", exception)``: a veriscale error travels
back as a value, and the caller raises it as the in-process rewarder would have.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from veriscale.errors import VeriscaleError
from veriscale.rewards.batch import BatchRewarder


@dataclass
class ReplicaSpec:
    """What each replica builds its verifier and rewarder from (pickled to it by Ray)."""

    uris: list[str]
    verifier: dict[str, Any]  # Verifier keyword arguments (scale and criteria as resolved objects)
    mode: str
    scheme: str
    group_settings: Any
    length_control: str = "off"  # applied at the pool, not in the replicas
    concurrency: int = 4
    rpm: int = 0
    tpm: int = 0
    probed: list[dict[str, Any] | None] | None = None
    chosen: dict[str, Any] = field(default_factory=dict)  # the settings library code reads
    setup: Callable[[], None] | None = None  # run first in each replica (a test registers its double)
    desk: Any = None
    embedded: bool = False


def replica_spec(rewarder: BatchRewarder, *, setup: Callable[[], None] | None = None) -> ReplicaSpec:
    """The spec of replicas that reward as ``rewarder`` does (its model URIs, verifier settings, mode,
    scheme and length control)."""
    from veriscale import settings as setting_source
    from veriscale.many.executors import cluster_rates, model_backends, model_uris, probed_states

    v = rewarder.verifier
    kwargs = {"scale": v.scale, "criteria": v.criteria, "repeats": v.repeats, "reasoning": v.reasoning,
              "discrete": v.discrete, "seed": v.seed, "tau": v._tau if v._tau_given else None,
              "max_calls": v.executor.gateway.max_calls, "concurrency": v.executor.gateway.concurrency,
              "injection_detect": v.injection_detect, "injection_mitigation": v.injection_mitigation,
              "joint": v.joint}
    return ReplicaSpec(uris=model_uris(v.model), verifier=kwargs, mode=rewarder.mode,
                       scheme=rewarder.grouper.scheme, group_settings=rewarder.grouper.settings,
                       length_control=rewarder.length_control, concurrency=v.executor.gateway.concurrency,
                       probed=probed_states(v.model), chosen=setting_source.source.choices(), setup=setup,
                       embedded=any(b.is_embedded for b in model_backends(v.model)), **cluster_rates(v.executor.gateway))


class RewardReplica:
    """The body of one replica actor: a verifier and a BatchRewarder of its own (length control off)."""

    def __init__(self, spec: ReplicaSpec, holder: str) -> None:
        self.broken: VeriscaleError | None = None
        try:
            self.rewarder = _build(spec, holder)
        except VeriscaleError as exc:  # said by ready(), in its own words
            self.broken = exc

    def ready(self) -> VeriscaleError | None:
        return self.broken

    async def rewards(self, prompts: list[str], responses: list[str | None],
                      lengths: list[int] | None) -> tuple[str, Any]:
        if self.broken is not None:
            return "error", self.broken
        try:
            return "ok", await self.rewarder.arewards(prompts, responses, lengths)
        except VeriscaleError as exc:  # the caller raises it as the in-process rewarder would
            return "error", exc


def _build(spec: ReplicaSpec, holder: str) -> BatchRewarder:
    from veriscale import settings as setting_source
    from veriscale.engine.routing import EndpointPool
    from veriscale.many.ray_limits import worker_backends
    from veriscale.many.ray_worker import _cpus_here
    from veriscale.verify.reward import Verifier

    if spec.setup is not None:
        spec.setup()
    setting_source.choose({"threads": _cpus_here(), **spec.chosen})
    # a replica's pool frees a dead replica's slots when it notices, but a killed pool takes its replicas
    # with it and frees nothing: a replica keeps no idle slot it leased
    backends = worker_backends(spec.uris, spec.probed, spec.desk, holder=holder, concurrency=spec.concurrency,
                               rpm=spec.rpm, tpm=spec.tpm, lease_idle_s=0)
    model: Any = backends[0] if len(backends) == 1 else EndpointPool(backends, concurrency=spec.concurrency)
    verifier = Verifier(model, **spec.verifier)
    return BatchRewarder(verifier, mode=spec.mode, settings=spec.group_settings, scheme=spec.scheme)
