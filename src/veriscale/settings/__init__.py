"""Every setting in one layer: declared once, resolved by one rule, read by library code the same way.

- :mod:`veriscale.settings.registry`: :data:`SPECS`, each setting's flag, environment variable,
  config-file key, type, default and bounds;
- :mod:`veriscale.settings.resolve`: the rule, flag > environment > file > default, into one frozen
  :class:`Settings`;
- :mod:`veriscale.settings.source`: the one environment reader (:func:`environment`) and what
  library code asks while it works (:func:`value`: the command's choice, else the environment,
  else the default);
- :mod:`veriscale.settings.words`: a setting's flag in the messages the CLI and the server print.

::

    from veriscale import settings
    settings.value("max_input_mb")               # 128.0, or what the command or $VERISCALE_MAX_INPUT_MB chose
    settings.resolve(load_config(None)).rpm      # every setting by the rule
    settings.SPEC["rpm"].env                     # 'VERISCALE_RPM'

Importing this package is light (only :mod:`~veriscale.settings.source`); the registry and the rule
load on first use, so any library module may import it.
"""

from __future__ import annotations

from typing import Any

from veriscale.settings.source import choose, chosen, environment, from_environment, value

_LAZY = {"Spec": "registry", "SPECS": "registry", "SPEC": "registry",
         "Settings": "resolve", "resolve": "resolve", "names": "resolve"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"veriscale.settings.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'veriscale.settings' has no attribute {name!r}")


__all__ = ["SPEC", "SPECS", "Settings", "Spec", "choose", "chosen", "environment", "from_environment", "names",
           "resolve", "value"]
