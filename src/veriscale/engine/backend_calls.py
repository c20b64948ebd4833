"""Calling a backend from the gateway's loop: its native async method when it has one, else the
blocking one in a worker thread that stops at its next check when cancelled.

    reply = await call_backend(backend, "score", request)     # backend.ascore(request), or score in a worker
    fp = await afingerprint(backend)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Literal

from veriscale.models.base import ModelBackend
from veriscale.models.abilities import AsyncIdentity, NativeChat, NativeScore, WeightsIdentity
from veriscale.models.cancel import in_worker


def _blocking(fn: Callable[..., Any], *args: Any, stop: Any = None, **kwargs: Any) -> Any:
    """A synchronous backend method, for :func:`in_worker` (which passes a stop flag it cannot use)."""
    return fn(*args, **kwargs)


async def call_backend(backend: ModelBackend, method: Literal["score", "chat"], *args: Any, **kwargs: Any) -> Any:
    """``score`` or ``chat`` on the loop: the backend's native ``ascore``/``achat``
    (:class:`~veriscale.models.abilities.NativeScore`, ``NativeChat``) if it has it, else the blocking
    method in a worker thread."""
    if method == "score":
        if isinstance(backend, NativeScore):
            return await backend.ascore(*args, **kwargs)
        return await in_worker(_blocking, backend.score, *args, **kwargs)
    if isinstance(backend, NativeChat):
        return await backend.achat(*args, **kwargs)
    return await in_worker(_blocking, backend.chat, *args, **kwargs)


async def aweights_fingerprint(backend: ModelBackend) -> str:
    """What identifies a backend's weights alone, for keys that no score read enters (chat calls): its
    ``aweights_fingerprint`` (a server's, with no read probe), else its fingerprint."""
    return await backend.aweights_fingerprint() if isinstance(backend, WeightsIdentity) else await afingerprint(backend)


async def afingerprint(backend: ModelBackend) -> str:
    """A backend's fingerprint without blocking the loop (its ``afingerprint``, else in a thread)."""
    if isinstance(backend, AsyncIdentity):
        return await backend.afingerprint()
    return await asyncio.to_thread(backend.fingerprint)
