"""The verifier a trainer adapter uses when it is not handed one.

    rewarder = default_rewarder()              # built once per process from the settings below
    rewarder = build_rewarder(verifier, mode="pointwise")   # what the adapters' constructors call
    verifier = reward_verifier(model="http://127.0.0.1:8000/v1#judge", criteria="general")

Settings, highest first: keyword arguments, environment (``VERISCALE_REWARD_MODEL``,
``VERISCALE_REWARD_CRITERIA``, ``VERISCALE_REWARD_MODE``, ``VERISCALE_REWARD_GROUP_SCHEME``,
``VERISCALE_REWARD_LENGTH_CONTROL``), the config file's ``[rewards]`` table (``model``, ``criteria``,
``scale``, ``mode``, ``group_scheme``, ``length_control``),
then the file's ``model`` and the defaults (embedded; ``group_scheme`` is the
``reward_group_scheme`` entry of :data:`veriscale.settings.registry.SPECS`, resolved by its rule). Trainers that load a reward function by module path (veRL) get their verifier this way::

    [rewards]
    model = "http://127.0.0.1:8000/v1#judge"     # or the name of a [models.NAME] table
    criteria = "general"
    mode = "group"                               # or "pointwise"
    group_scheme = "sparse"                      # or "round_robin" (every pair)
    length_control = "off"                       # or "residual" (veriscale.rewards.length)
    answer_within = 150                          # serve-reward: answer each request within 150 s
    joint = true                                 # one call reads every criterion (default: off)
"""

from __future__ import annotations

import threading
from typing import Any

from veriscale.config import Config, load_config
from veriscale.engine.routing import EndpointPool
from veriscale.models.uri import load_backend
from veriscale.rewards.batch import BatchRewarder
from veriscale.rewards.group import check_scheme
from veriscale.settings.sections import REWARDS, section
from veriscale.verify.reward import Verifier

_lock = threading.Lock()
_default: BatchRewarder | None = None



def reward_settings(cfg: Config | None = None) -> dict[str, Any]:
    """The ``[rewards]`` table of the config file with the environment over it (the ``REWARDS`` section
    of :mod:`veriscale.settings.sections` and the global reward settings, each by the one rule)."""
    from veriscale.settings.resolve import resolve

    cfg = cfg or load_config(None)
    got = section(REWARDS, cfg)
    resolved = resolve(cfg)
    return {**got, "model": got["model"] or cfg.model or "embedded",
            "group_scheme": resolved.reward_group_scheme, "length_control": resolved.reward_length_control}


def reward_verifier(model: str | None = None, *, criteria: str | None = None, scale: str | None = None,
                    **settings: Any) -> Verifier:
    """A Verifier for rewards; unset arguments come from :func:`reward_settings`."""
    cfg = load_config(None)
    base = reward_settings(cfg)
    uris = cfg.model_uris(model or base["model"])
    backends = [load_backend(uri) for uri in uris]
    backend = backends[0] if len(backends) == 1 else EndpointPool(backends, concurrency=cfg.gateway.concurrency)
    settings.setdefault("concurrency", cfg.gateway.concurrency)
    settings.setdefault("joint", base["joint"])
    return Verifier(backend, criteria=criteria or base["criteria"], scale=scale or base["scale"], **settings)


def build_rewarder(verifier: Verifier | None = None, *, model: str | None = None, mode: str | None = None,
                   criteria: str | None = None, group_scheme: str | None = None,
                   length_control: str | None = None) -> BatchRewarder:
    """A BatchRewarder on ``verifier`` (else one built from the settings), in ``mode``, ranking groups
    by ``group_scheme`` and controlling length by ``length_control`` (else the settings')."""
    if verifier is None:
        verifier = reward_verifier(model, criteria=criteria)
    base = reward_settings() if None in (mode, group_scheme, length_control) else {}
    return BatchRewarder(verifier, mode=mode or base["mode"], scheme=check_scheme(group_scheme or base["group_scheme"]),
                         length_control=length_control or base["length_control"])


def default_rewarder() -> BatchRewarder:
    """The process's rewarder from the settings (built on first use, then shared)."""
    global _default
    with _lock:
        if _default is None:
            _default = build_rewarder()
        return _default
