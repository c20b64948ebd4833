"""Reading an OpenAI-compatible server's replies: the score slot's top logprobs, a joint reply's
slots, a sampled read's draws, the reasoning turn and a chat completion. Both logprob shapes
(chat's ``content[].top_logprobs[]`` and the legacy completions ``top_logprobs`` dicts) are
parsed by ``veriscale.models.logprobs``; here a reply without them becomes the call's failure, with
a sentence that says whether the server never gives them or drops them now and then::

    shares = ReplyShares()                                 # one per server, shared by copies
    names = ServerNames("http://127.0.0.1:8000/v1", "qwen3-8b at http://127.0.0.1:8000/v1")
    top = slot_top(data, shares, names, instead="two-stage scoring")
    slots = joint_slots(positions, why, headers, labels, first_at_start=True)
    chat_reply(data, names.display_name)                   # a ChatResponse
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from veriscale.errors import ModelCallError
from veriscale.models.base import ChatResponse, slot_entry
from veriscale.models.logprobs import (
    MalformedLogprobs,
    NoLogprobs,
    first_position_top,
    generated_positions,
    joint_slot_tops,
    label_distribution,
)
from veriscale.models.reply_usage import reply_usage

#: one generated position of a reply: (its token, the top (token, probability) pairs there)
Position = tuple[str, list[tuple[str, float]]]


class ReplyShares:
    """How many slot replies of one server came with and without logprobs (shared by copies)."""

    def __init__(self) -> None:
        self.with_logprobs = 0
        self.without = 0
        self._lock = threading.Lock()

    def count(self, had: bool) -> tuple[int, int]:
        """Count one reply; the replies without logprobs and all replies so far."""
        with self._lock:
            if had:
                self.with_logprobs += 1
            else:
                self.without += 1
            return self.without, self.with_logprobs + self.without


@dataclass(frozen=True)
class ServerNames:
    """How a failure names the server: its ``base_url`` and the backend's ``display_name``."""

    base_url: str
    display_name: str


def no_logprobs_reason(shares: ReplyShares, names: ServerNames, where: str, instead: str) -> str:
    """The reason of a reply without logprobs, counted: a server that never gives them wants another
    start; one that gave them to other replies drops them now and then, and a rerun asks again."""
    without, replies = shares.count(False)
    if without < replies:
        return (f"{without} of {replies} replies from {names.base_url} came with no logprobs {where}: the server "
                f"drops them intermittently (an overloaded server, or a proxy in between); the others were read, "
                f"and a rerun asks these calls again")
    return (f"{names.display_name} returned no logprobs {where}: use a server started with logprobs enabled, "
            f"or {instead}")


def slot_top(data: dict[str, Any], shares: ReplyShares, names: ServerNames, instead: str) -> list[tuple[str, float]]:
    """The score slot's (token, probability) pairs of a one-token reply, counted in ``shares``; a reply
    without logprobs (``instead``: what to use then) or with malformed ones is a ModelCallError."""
    try:
        top = first_position_top(data)
    except NoLogprobs:
        raise ModelCallError(no_logprobs_reason(shares, names, "at the score slot", instead)) from None
    except MalformedLogprobs as exc:
        shares.count(True)  # they came, unreadable: another failure than none at all
        raise ModelCallError(f"{names.display_name} returned malformed logprobs ({exc})") from None
    shares.count(True)
    return top


def joint_positions(data: dict[str, Any], shares: ReplyShares, names: ServerNames, instead: str
                    ) -> tuple[list[Position], str | None]:
    """A joint reply's generated positions, and why there are none where its logprobs are malformed
    (every slot is then re-asked alone); a reply without logprobs is a ModelCallError."""
    why: str | None
    try:
        positions = generated_positions(data)
    except NoLogprobs:
        raise ModelCallError(no_logprobs_reason(shares, names, "in its joint reply", instead)) from None
    except MalformedLogprobs as exc:  # unreadable as a whole: every slot is re-asked alone
        shares.count(True)
        positions, why = [], f"the joint reply's logprobs are malformed ({exc})"
    else:
        shares.count(True)
        why = None
    return positions, why


def joint_slots(positions: list[Position], why: str | None, headers: list[str], labels: tuple[str, ...], *,
                first_at_start: bool) -> list[dict[str, Any]]:
    """One ``ScoreResponse.slots`` entry per header: the label distribution right after it, or the
    slot's ``problem`` (never reached, written off format, or ``why`` the reply is unreadable)."""
    slots = []
    for top, written, problem in (joint_slot_tops(positions, headers, first_at_start=first_at_start)
                                  if positions else [(None, "", why or "the joint reply is empty")] * len(headers)):
        if top is None:
            slots.append(slot_entry({lab: 0.0 for lab in labels}, 0.0, 1.0, "", problem))
            continue
        probs, mass, unseen = label_distribution(top, labels)
        slots.append(slot_entry(probs, mass, unseen, written,
                                None if mass > 0 else f"the joint reply wrote {written!r} there, not a score label"))
    return slots


def reply_draws(data: dict[str, Any]) -> list[str]:
    """The text of each choice of a reply (a sampled read's draws)."""
    out = []
    for choice in data.get("choices") or []:
        if isinstance(choice, dict):
            message = choice.get("message")
            msg: dict[str, Any] = message if isinstance(message, dict) else {}
            out.append(str(choice.get("text") if "text" in choice else msg.get("content") or ""))
    return out


def reasoning_reply(data: dict[str, Any], completions: bool) -> tuple[str, int]:
    """The reasoning turn's text (stripped) and its completion tokens."""
    if completions:
        text = data["choices"][0].get("text", "")
    else:
        text = data["choices"][0]["message"].get("content") or ""
    stripped: str = text.strip()
    return stripped, int((data.get("usage") or {}).get("completion_tokens", 0))


def chat_reply(data: dict[str, Any], display_name: str) -> ChatResponse:
    """A chat completion's first choice as a ``ChatResponse`` (its usage, finish reason and the stop
    string vLLM and SGLang say it stopped on); one without choices is a ModelCallError."""
    try:
        choice = data["choices"][0]
        msg = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise ModelCallError(f"{display_name} returned a chat response without choices") from None
    usage = reply_usage(data)
    matched = choice.get("stop_reason", choice.get("matched_stop"))  # vLLM / SGLang: the stop string (or token id)
    return ChatResponse(content=msg.get("content") or "", tool_calls=list(msg.get("tool_calls") or []),
                        prompt_tokens=usage.prompt_tokens, cached_prompt_tokens=usage.cached_prompt_tokens,
                        completion_tokens=usage.completion_tokens,
                        finish_reason=str(choice.get("finish_reason") or ""),
                        stop_sequence=matched if isinstance(matched, str) and matched else None,
                        system_fingerprint=str(data.get("system_fingerprint") or ""))


__all__ = ["Position", "ReplyShares", "ServerNames", "chat_reply", "joint_positions", "joint_slots",
           "no_logprobs_reason", "reasoning_reply", "reply_draws", "slot_top"]
