"""Stream a reply that is not chosen yet: keep-alive events while the candidates and the
verification run, then the winner's events at once.

    async for chunk in while_choosing(service.answer(conv, "chat"), keepalive=": keep-alive\\n\\n",
                                      opening=[...], render=lambda outcome: [...], failed=lambda exc: [...]):
        ...

The opening events (Responses' ``response.created``, Anthropic's ``message_start``) go out
first, so the client's first byte does not wait for the pick.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

KEEPALIVE_S = 1.0
# The answers being chosen for streams. The event loop holds tasks only weakly: a stream whose
# client left is dropped unfinished, and its answer must still end (and record its run).
_choosing: set[asyncio.Future] = set()


async def while_choosing(answer: Awaitable[Any], *, keepalive: str, render: Callable[[Any], Iterable[str]],
                         failed: Callable[[BaseException], Iterable[str]], opening: Iterable[str] = (),
                         after: Callable[[Any], None] | None = None,
                         interval_s: float = KEEPALIVE_S) -> AsyncIterator[str]:
    task = asyncio.ensure_future(answer)
    _choosing.add(task)
    task.add_done_callback(_choosing.discard)
    try:
        for chunk in opening:
            yield chunk
        while True:
            done, _ = await asyncio.wait({task}, timeout=interval_s)
            if done:
                break
            yield keepalive
        try:
            outcome = task.result()
        except Exception as exc:  # noqa: BLE001 - told to the client in its API's error event
            for chunk in failed(exc):
                yield chunk
            return
        for chunk in render(outcome):
            yield chunk
        if after is not None:
            after(outcome)
    finally:
        if not task.done():
            task.cancel()
