"""Which weights answered, per model URI, as the store last saw them; new weights under an old
name are noticed, said, and their older cached verdicts are not served.

Two kinds of identity:

- known when the backend opens (the embedded GGUF's hash, vLLM's model ``root``, llama-server's
  model path): it is part of the backend's ``fingerprint()``, so every call key changes with it;
  :func:`note_fingerprint` says so when a model URI's fingerprint differs from the last one seen.
- only in replies (OpenAI's ``system_fingerprint``): each reply carries it
  (``ScoreResponse.system_fingerprint``); :func:`note_reply` keeps the latest per model URI and
  :func:`serves` refuses a cached reply that came from other weights::

    note_reply(store, "openai:gpt-4.1-mini", {"system_fingerprint": "fp_1"})   # None: first seen
    note_reply(store, "openai:gpt-4.1-mini", {"system_fingerprint": "fp_2"})   # a note: they changed
    serves(store, "openai:gpt-4.1-mini", {"system_fingerprint": "fp_1"})       # False

A reply or a model that reports no identity is served as before (nothing tells the weights apart).
Notes go to the ``veriscale`` logger (stderr when nothing else handles it).
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from veriscale.models.read_strategy import without_read

if TYPE_CHECKING:
    from veriscale.engine.store import Store

LOG = logging.getLogger("veriscale.models.weights")
OPENED_KEY = "weights:fingerprint:"
REPLY_KEY = "weights:reply:"


def _changed(store: Store, key: str, identity: str) -> str | None:
    """Record ``identity`` under ``key``; the previous identity when it differed."""
    before = store.get_meta(key)
    if before != identity:
        store.set_meta(key, identity)
    return before if before is not None and before != identity else None


def _differing(a: str, b: str) -> tuple[str, str]:
    """``a`` and ``b`` without their shared head (cut at a space or colon): what changed."""
    shared = os.path.commonprefix([a, b])
    cut = max(shared.rfind(" "), shared.rfind(":")) + 1
    return a[cut:], b[cut:]


def note_fingerprint(store: Store | None, uri: str, fingerprint: str) -> str | None:
    """Record the fingerprint ``uri`` opened with; a note (also logged) when it changed."""
    if store is None or not fingerprint:
        return None
    fingerprint = without_read(fingerprint)  # another read path of the same weights is no news
    before = _changed(store, OPENED_KEY + uri, fingerprint)
    if before is None:
        return None
    old, new = _differing(before, fingerprint)
    note = (f"the model {uri} now has other weights ({old} -> {new}): "
            "its verdicts cached for the old weights are not reused")
    LOG.warning(note)
    return note


def reply_identity(response: dict[str, Any] | None) -> str:
    """What a stored reply says about the weights that wrote it ("" when nothing)."""
    return str((response or {}).get("system_fingerprint") or "")


def note_reply(store: Store | None, uri: str, response: dict[str, Any] | None) -> str | None:
    """Record the weights a fresh reply of ``uri`` names; a note (also logged) when they changed."""
    identity = reply_identity(response)
    if store is None or not identity:
        return None
    before = _changed(store, REPLY_KEY + uri, identity)
    if before is None:
        return None
    note = (f"the model {uri} answers from other weights now (system_fingerprint {before} -> {identity}): "
            "its verdicts cached before are not reused")
    LOG.warning(note)
    return note


def serves(store: Store | None, uri: str, cached: dict[str, Any] | None) -> bool:
    """Whether a cached reply of ``uri`` may be served: False when it names other weights than the latest."""
    identity = reply_identity(cached)
    if store is None or not identity:
        return True
    latest = store.get_meta(REPLY_KEY + uri)
    return latest is None or latest == identity
