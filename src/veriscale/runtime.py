"""Kept for compatibility: what the CLI hands over to library code now lives in the settings layer,
:mod:`veriscale.settings.source` (``choose``, ``chosen``, and ``value``, which also reads the
environment and the default)::

    from veriscale import settings
    settings.choose({"max_input_mb": 8.0})
    settings.value("max_input_mb")          # 8.0
"""

from __future__ import annotations

from veriscale.settings.source import choose, chosen

__all__ = ["choose", "chosen"]
