"""The settings library code reads while it works, as this process's command chose them.

The CLI resolves every setting by one rule (flag > environment > file > default,
:mod:`veriscale.cli.settings`). Some are read deep inside the library, far from any command: the
input cap in the reader, the heartbeat threshold in the run liveness check, the host caps in the
harness, joint scoring in every Verifier, the embedded model's threads. The command hands them
over once, here; the library asks :func:`chosen` and, where the command chose nothing (the Python
API, a test), reads the setting's environment variable itself, then its default::

    from veriscale import runtime
    runtime.choose({"max_input_mb": 8.0})   # the CLI, with what a flag or the config file gave
    runtime.chosen("max_input_mb")          # 8.0
    runtime.chosen("run_stale_s")           # None: read $VERISCALE_RUN_STALE_S, else the default
    runtime.choose({})                      # forget every choice

Which settings travel this way is declared on each one's ``Spec`` (``library=True``); nothing here
imports the rest of veriscale, so any module may read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

_chosen: Mapping[str, Any] = MappingProxyType({})


def choose(values: Mapping[str, Any]) -> None:
    """Replace every choice with ``values`` (setting name -> value; None: not chosen)."""
    global _chosen
    _chosen = MappingProxyType({name: value for name, value in values.items() if value is not None})


def chosen(name: str) -> Any:
    """The value the command chose for ``name``, or None when it chose none."""
    return _chosen.get(name)


__all__ = ["choose", "chosen"]
