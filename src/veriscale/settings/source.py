"""Where a setting's value comes from while library code works: the one environment reader and
the command's hand-over.

Every setting is declared once (:mod:`veriscale.settings.registry`) and resolved by one rule,
flag > environment > file > default (:mod:`veriscale.settings.resolve`). Library code far from any
command (the input cap in the reader, the heartbeat threshold, the host caps, joint scoring, the
embedded model's threads) asks :func:`value`; the CLI hands over what a flag or the config file
gave with :func:`choose`::

    choose({"max_input_mb": 8.0})    # the CLI, with what a flag or the config file gave
    value("max_input_mb")            # 8.0; with no choice: $VERISCALE_MAX_INPUT_MB, else 128.0
    environment("OPENAI_API_KEY")    # the raw text of an environment variable, None when unset or blank
    choose({})                       # forget every choice

:func:`environment` is the one place that reads ``os.environ`` for a setting (processes started
for a session get their environment passed on elsewhere). This module imports no other part of
veriscale at import time, so any module may read it; the registry is imported on first use.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

_chosen: Mapping[str, Any] = MappingProxyType({})


def environment(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The text of environment variable ``name`` (a Spec's ``env``, or a backend's key variable);
    None when it is unset or blank."""
    raw = (os.environ if environ is None else environ).get(name)
    return raw if raw is not None and raw.strip() else None


def choose(values: Mapping[str, Any]) -> None:
    """Replace every choice with ``values`` (setting name -> value; None: not chosen)."""
    global _chosen
    _chosen = MappingProxyType({name: v for name, v in values.items() if v is not None})


def chosen(name: str) -> Any:
    """The value the command chose for ``name`` (a flag or the config file), or None when it chose none."""
    return _chosen.get(name)


def choices() -> dict[str, Any]:
    """Every choice the command made (what a worker process is handed to read the same settings)."""
    return dict(_chosen)


def from_environment(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """Setting ``name`` from its environment variable, parsed and checked (None when unset or blank);
    a bad value is the setting's one sentence."""
    from veriscale.settings.registry import SPEC

    spec = SPEC[name]
    raw = environment(spec.env, environ) if spec.env else None
    return None if raw is None else spec.from_env(raw, library=True)


def value(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """Setting ``name`` as library code reads it: the command's choice, else its environment
    variable, else its default (the registry's)."""
    given = chosen(name)
    if given is not None:
        return given
    found = from_environment(name, environ)
    if found is not None:
        return found
    from veriscale.settings.registry import SPEC

    return SPEC[name].default


__all__ = ["choices", "choose", "chosen", "environment", "from_environment", "value"]
