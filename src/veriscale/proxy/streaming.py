"""Stream a reply that is not chosen yet: keep-alive events while the candidates and the
verification run, then the winner's events, in pieces as it would have streamed.

    async for chunk in while_choosing(service.answer(conv, "chat"), keepalive=": keep-alive\\n\\n",
                                      opening=[...], render=lambda outcome: [...], failed=lambda exc: [...]):
        ...
    pieces("Run the tests, then read the diff.")   # ['Run ', 'the ', 'tests, ', 'then ', 'read ', 'the ', 'diff.']

The opening events (Responses' ``response.created``) go out first, so the client's first byte
does not wait for the pick. An opening that needs what the first candidate says (Anthropic's
``message_start`` carries the input token count) waits for ``first`` instead, with keep-alives
(``keepalive_before``) until it comes: ``opening`` is then a function of its value (None when
the answer ended before any candidate came back).

The winner is sent as several deltas (text, tool-call arguments, custom tool input): one a word
with the spaces after it, a word longer than :data:`PIECE_CHARS` split further. The pieces join
to exactly the text, so an SDK's accumulated message equals the non-streamed one.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

KEEPALIVE_S = 1.0
PIECE_CHARS = 16  # a longer word (or JSON without spaces) is sent in pieces of at most this many characters
_WORD = re.compile(r"\S*\s*")


def pieces(text: str, size: int = PIECE_CHARS) -> list[str]:
    """``text`` as the deltas a streamed reply would have sent (module docstring); ``"".join`` gives it back."""
    out = []
    for word in _WORD.findall(text):
        out.extend(word[i:i + size] for i in range(0, len(word), size))
    return out or [""]
# The answers being chosen for streams. The event loop holds tasks only weakly: a stream whose
# client left is dropped unfinished, and its answer must still end (and record its run).
_choosing: set[asyncio.Future] = set()


async def while_choosing(answer: Awaitable[Any], *, keepalive: str, render: Callable[[Any], Iterable[str]],
                         failed: Callable[[BaseException], Iterable[str]], opening: Iterable[str] = (),
                         after: Callable[[Any], None] | None = None, first: "asyncio.Future[Any] | None" = None,
                         keepalive_before: str = ": keep-alive\n\n",
                         interval_s: float = KEEPALIVE_S) -> AsyncIterator[str]:
    task = asyncio.ensure_future(answer)
    _choosing.add(task)
    task.add_done_callback(_choosing.discard)
    try:
        if first is not None:  # the opening waits for the first candidate; the first byte does not
            yield keepalive_before
            while not first.done() and not task.done():
                await asyncio.wait({task, first}, timeout=interval_s, return_when=asyncio.FIRST_COMPLETED)
                if not first.done() and not task.done():
                    yield keepalive_before
            opening = opening(first.result() if first.done() else None)  # type: ignore[operator]
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
