"""The verifier a trainer adapter uses when it is not handed one.

    rewarder = default_rewarder()              # built once per process from the settings below
    rewarder = build_rewarder(verifier, mode="pointwise")   # what the adapters' constructors call
    verifier = reward_verifier(model="http://127.0.0.1:8000/v1#judge", criteria="general")

Settings, highest first: keyword arguments, environment (``VERISCALE_REWARD_MODEL``,
``VERISCALE_REWARD_CRITERIA``, ``VERISCALE_REWARD_MODE``), the config file's ``[rewards]`` table
(``model``, ``criteria``, ``scale``, ``mode``), then the file's ``model`` and the embedded
default. Trainers that load a reward function by module path (veRL) get their verifier this way::

    [rewards]
    model = "http://127.0.0.1:8000/v1#judge"     # or the name of a [models.NAME] table
    criteria = "general"
    mode = "group"                               # or "pointwise"
    joint = true                                 # one call reads every criterion (default: off)
"""

from __future__ import annotations

import threading
from typing import Any

from veriscale.config import Config, load_config, pick
from veriscale.engine.routing import EndpointPool
from veriscale.errors import UserError
from veriscale.models.uri import load_backend
from veriscale.rewards.batch import BatchRewarder
from veriscale.verify.reward import Verifier

_lock = threading.Lock()
_default: BatchRewarder | None = None

_KNOWN = {"model": str, "criteria": str, "scale": str, "mode": str, "joint": bool}


def reward_settings(cfg: Config | None = None) -> dict[str, Any]:
    """The ``[rewards]`` table of the config file, checked, with the environment over it."""
    cfg = cfg or load_config(None)
    table = cfg.raw.get("rewards", {})
    if not isinstance(table, dict):
        raise UserError(f"config file '{cfg.path}': [rewards] must be a table: fix that section")
    for key, value in table.items():
        if key not in _KNOWN:
            raise UserError(f"config file '{cfg.path}': [rewards] has no setting '{key}': use {', '.join(_KNOWN)}")
        if not isinstance(value, _KNOWN[key]):
            kind = "true or false" if _KNOWN[key] is bool else "text"
            raise UserError(f"config file '{cfg.path}': rewards.{key} must be {kind}, not {value!r}: fix that line")
    return {
        "model": pick(env="VERISCALE_REWARD_MODEL", file=table.get("model"), default=cfg.model or "embedded"),
        "criteria": pick(env="VERISCALE_REWARD_CRITERIA", file=table.get("criteria"), default="general"),
        "scale": table.get("scale", "letters"),
        "mode": pick(env="VERISCALE_REWARD_MODE", file=table.get("mode"), default="group"),
        "joint": table.get("joint"),  # None: the process default (veriscale.verify.joint.joint_default)
    }


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
                   criteria: str | None = None) -> BatchRewarder:
    """A BatchRewarder on ``verifier`` (else one built from the settings), in ``mode`` (else the settings')."""
    if verifier is None:
        verifier = reward_verifier(model, criteria=criteria)
    return BatchRewarder(verifier, mode=mode or reward_settings()["mode"])


def default_rewarder() -> BatchRewarder:
    """The process's rewarder from the settings (built on first use, then shared)."""
    global _default
    with _lock:
        if _default is None:
            _default = build_rewarder()
        return _default
