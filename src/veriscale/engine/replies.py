"""What makes a score reply usable: probability on the score labels at the slot.

    problem = score_reply_problem(resp)     # None, or why the reply cannot grade (a sentence part)
    if problem: ...                         # the gateway records the call as failed with it
    resp, problem = await usable_reply(backend, request, send, another_call=lambda: True)  # may ask twice

A reply that fails this is a failed call, never an ok one: a rerun asks again. At temperature
0 the gateway asks once more in the same run (the backend's ``retry_variant()``, e.g. more
top_logprobs) before it reports :func:`cannot_grade`. That second try is another request, so the
gateway keys and records it as its own call (:func:`retry_of`); the first call's key then holds no
record of its own but :class:`Answered`'s pointer to the retry's key (``retried_key``)::

    wider, how = retry_of(backend)          # the variant and how it asks ("with top_logprobs=40"), or None

A joint reply (``resp.slots``) is usable as long as it is one: a slot it could not read (even every slot) is
re-asked alone by the Verifier (``veriscale.verify.joint``), so only probabilities that are not
numbers are a problem here.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from veriscale.errors import ModelCallError
from veriscale.models.abilities import WiderRetry
from veriscale.models.base import ChatResponse, ScoreRequest, ScoreResponse

NO_LABEL_MASS = "no probability on any score label (the model answered off-format)"
#: the store's meta key that points a call whose off-format reply was asked again to the retry's own key
RETRIED_META = "call:retried:"


def retried_key(key: str) -> str:
    """The meta key under which ``key``'s retry key is kept."""
    return RETRIED_META + key


#: A reply the gateway stores: a chat completion or a score reading.
Reply = TypeVar("Reply", ChatResponse, ScoreResponse)


@dataclass(frozen=True)
class ReplyKind(Generic[Reply]):
    """A kind of call: its name in the store (``"chat"``, ``"score"``) and how its stored answer reads back."""

    name: str
    read: Callable[[dict[str, Any]], Reply]


def _chat_reply(stored: dict[str, Any]) -> ChatResponse:
    return ChatResponse(**stored)


CHAT = ReplyKind("chat", _chat_reply)
SCORE = ReplyKind("score", ScoreResponse.from_dict)


@dataclass(frozen=True)
class Answered(Generic[Reply]):
    """A planned call answered by another request (its retry asked another way), recorded under that
    request's own key ``key``: ``reply`` (None when it failed too) and ``problem`` (why it cannot grade)."""

    reply: Reply | None
    problem: str | None
    key: str
    first: Reply  # the planned call's own reply (off-format): counted, never recorded as ok


def retry_of(backend: Any) -> tuple[Any, str] | None:
    """The backend's ``retry_variant()`` and how it asks again, or None when it has no other way."""
    wider = backend.retry_variant() if isinstance(backend, WiderRetry) else None
    if wider is None:
        return None
    return wider, (f"with top_logprobs={wider.top_logprobs}" if hasattr(wider, "top_logprobs") else "another way")


def score_reply_problem(resp: ScoreResponse) -> str | None:
    """Why ``resp`` cannot grade, or None when it can."""
    if resp.slots:
        readable = [s for s in resp.slots if _mass_ok(s.get("label_mass"))]
        if any(not isinstance(p, (int, float)) or math.isnan(p) for s in readable for p in s["label_probs"].values()):
            return "label probabilities that are not numbers"
        return None
    mass = resp.label_mass
    if not isinstance(mass, (int, float)) or math.isnan(mass) or mass <= 0:
        return NO_LABEL_MASS
    if any(not isinstance(p, (int, float)) or math.isnan(p) for p in resp.label_probs.values()):
        return "label probabilities that are not numbers"
    return None


def deterministic(request: ScoreRequest) -> bool:
    """Whether asking again the same way would give the same reply (no sampled reasoning)."""
    return not request.reasoning or request.temperature <= 0


def cannot_grade(problem: str, retried: str | None = None) -> str:
    """The failure of a deterministic call whose reply stayed off-format (``retried``: how it was asked again)."""
    again = f", also when asked again {retried}" if retried else ""
    return f"the judge cannot grade this: {problem}{again}"


async def usable_reply(backend: Any, request: ScoreRequest, send: Callable[[Any], Awaitable[ScoreResponse]], *,
                       another_call: Callable[[], bool]) -> tuple[ScoreResponse, str | None]:
    """``send(backend)``'s reply and, when it cannot grade, why. A deterministic off-format reply is
    asked once more (``backend.retry_variant()``) if ``another_call()`` lets it spend one more call;
    the second reply carries the cost of both."""
    resp = await send(backend)
    problem = score_reply_problem(resp)
    if problem is None or not deterministic(request):
        return resp, problem
    retry = retry_of(backend)
    if retry is None or not another_call():
        return resp, cannot_grade(problem)
    wider, how = retry
    try:
        again = await send(wider)
    except ModelCallError as exc:
        return resp, cannot_grade(problem, f"{how} (that call failed: {exc})")
    again = with_cost_of(again, resp)
    later = score_reply_problem(again)
    return again, (cannot_grade(later, how) if later else None)


def with_cost_of(again: ScoreResponse, first: ScoreResponse) -> ScoreResponse:
    """``again`` carrying the cost of ``first`` too (what the reading that needed both cost)."""
    both_cached = None if None in (again.cached_prompt_tokens, first.cached_prompt_tokens) else \
        again.cached_prompt_tokens + first.cached_prompt_tokens  # type: ignore[operator]
    return replace(again, prompt_tokens=again.prompt_tokens + first.prompt_tokens,
                   prompt_tokens_total=again.prompt_tokens_total + first.prompt_tokens_total,
                   cached_prompt_tokens=both_cached,
                   completion_tokens=again.completion_tokens + first.completion_tokens)


def _mass_ok(mass: object) -> bool:
    return isinstance(mass, (int, float)) and not math.isnan(mass) and mass > 0
