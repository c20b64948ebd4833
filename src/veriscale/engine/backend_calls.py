"""Calling a backend from the gateway's loop: its native async method when it has one, else the
blocking one in a worker thread that stops at its next check when cancelled.

    reply = await call_backend(backend, "score", request)     # backend.ascore(request), or score in a worker
    fp = await afingerprint(backend)
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from veriscale.models.base import ModelBackend
from veriscale.models.cancel import in_worker


def _blocking(fn: Callable[..., Any], *args: Any, stop: Any = None, **kwargs: Any) -> Any:
    """A synchronous backend method, for :func:`in_worker` (which passes a stop flag it cannot use)."""
    return fn(*args, **kwargs)


async def call_backend(backend: ModelBackend, method: str, *args: Any, **kwargs: Any) -> Any:
    """A backend method on the loop: its native ``a<method>`` if it has one, else in a worker thread."""
    native = getattr(backend, f"a{method}", None)
    if native is not None:
        return await native(*args, **kwargs)
    return await in_worker(_blocking, getattr(backend, method), *args, **kwargs)


async def aweights_fingerprint(backend: ModelBackend) -> str:
    """What identifies a backend's weights alone, for keys that no score read enters (chat calls): its
    ``aweights_fingerprint`` (a server's, with no read probe), else its fingerprint."""
    native: Callable[[], Awaitable[str]] | None = getattr(backend, "aweights_fingerprint", None)
    return await native() if native is not None else await afingerprint(backend)


async def afingerprint(backend: ModelBackend) -> str:
    """A backend's fingerprint without blocking the loop (its ``afingerprint``, else in a thread)."""
    native: Callable[[], Awaitable[str]] | None = getattr(backend, "afingerprint", None)
    if native is not None:
        return await native()
    return await asyncio.to_thread(backend.fingerprint)
