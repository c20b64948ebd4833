"""Third-party extensions from installed entry points, the way simonw/llm loads its plugins.

Each group is loaded once a process; a plugin that does not import is one sentence naming it::

    for name, loaded in plugins("veriscale.backends", "backend"):
        register(name, loaded)
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib.metadata import entry_points
from typing import Any

from veriscale.errors import UserError

_loaded_groups: set[str] = set()


def plugins(group: str, kind: str) -> Iterator[tuple[str, str, Any]]:
    """``(name, value, object)`` of each entry point of ``group``, the first time a process asks
    (later calls yield nothing); ``kind`` names such a plugin in a refusal ("backend")."""
    if group in _loaded_groups:
        return
    _loaded_groups.add(group)
    for ep in entry_points(group=group):
        try:
            loaded = ep.load()
        except Exception as exc:  # noqa: BLE001 - any import failure of a third-party plugin
            raise UserError(f"the {kind} plugin '{ep.name}' ({ep.value}) does not load ({type(exc).__name__}: {exc}): "
                            "fix or uninstall the distribution that provides it") from None
        yield ep.name, ep.value, loaded


def forget(group: str) -> None:
    """Load ``group`` again on the next :func:`plugins` call (tests that install a plugin)."""
    _loaded_groups.discard(group)
