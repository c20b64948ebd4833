"""Parse top logprobs from OpenAI-style responses: the first generated position, or every one.

Two shapes exist and both are accepted:

* chat (and llama.cpp server): ``choices[0].logprobs.content[0].top_logprobs = [{token, logprob}]``
* legacy completions: ``choices[0].logprobs.top_logprobs = [{token: logprob, ...}, ...]``

    top = first_position_top(response_json)      # [("A", 0.61), (" B", 0.2), ...]
    label_distribution(top, ("A", "B"))          # (probs, label_mass, unseen_mass)

A joint reply is one generation with logprobs at every position: ``generated_positions`` reads
both shapes, ``joint_slot_tops`` finds each slot header in the generated text and returns the
top logprobs of the token right after it::

    joint_slot_tops(generated_positions(payload), ["Correctness:", "\nOutput:"], first_at_start=True)
"""

from __future__ import annotations

import math
from typing import Any


#: the bare whitespace tokens a small model may write before its grade (read through, on every backend)
WHITESPACE_TOKENS = (" ", "\n", " \n", "\n\n")
#: a whitespace path at the slot is followed only when it is at least this likely
WHITESPACE_MIN_PROB = 0.01


class NoLogprobs(Exception):
    """The response carries no logprobs at all (the server does not support them)."""


class MalformedLogprobs(Exception):
    """Logprobs are present but not in a shape we can read."""


def _entries_from_content(content: Any) -> list[tuple[str, float]]:
    if not isinstance(content, list) or not content:
        raise MalformedLogprobs("logprobs.content is empty or not a list")
    first = content[0]
    if not isinstance(first, dict) or not isinstance(first.get("top_logprobs"), list):
        raise MalformedLogprobs("logprobs.content[0].top_logprobs is missing")
    out = []
    for item in first["top_logprobs"]:
        if not isinstance(item, dict) or "token" not in item or "logprob" not in item:
            raise MalformedLogprobs("a top_logprobs entry lacks token or logprob")
        out.append((str(item["token"]), _prob(item["logprob"])))
    if not out:  # some servers put only the chosen token
        out.append((str(first.get("token", "")), _prob(first.get("logprob"))))
    return out


def _entries_from_legacy(top: Any) -> list[tuple[str, float]]:
    if not isinstance(top, list) or not top or not isinstance(top[0], dict):
        raise MalformedLogprobs("logprobs.top_logprobs[0] is not a token→logprob object")
    return [(str(tok), _prob(lp)) for tok, lp in top[0].items()]


def _prob(logprob: Any) -> float:
    if isinstance(logprob, bool) or not isinstance(logprob, (int, float)):
        raise MalformedLogprobs(f"logprob {logprob!r} is not a number")
    if math.isnan(logprob) or logprob > 1e-6:
        raise MalformedLogprobs(f"logprob {logprob!r} is not a log-probability")
    return math.exp(min(logprob, 0.0))


def _logprobs_object(payload: dict[str, Any]) -> dict[str, Any]:
    """The first choice's ``logprobs`` object (NoLogprobs / MalformedLogprobs when it is absent or odd)."""
    try:
        choice = payload["choices"][0]
    except (KeyError, IndexError, TypeError):
        raise MalformedLogprobs("response has no choices") from None
    lp = choice.get("logprobs") if isinstance(choice, dict) else None
    if lp is None:
        raise NoLogprobs()
    if not isinstance(lp, dict):
        raise MalformedLogprobs("logprobs is not an object")
    return lp


def first_position_top(payload: dict[str, Any]) -> list[tuple[str, float]]:
    """Top (token, probability) pairs at the first generated token."""
    lp = _logprobs_object(payload)
    if lp.get("content") is not None:
        return _entries_from_content(lp["content"])
    if lp.get("top_logprobs") is not None:
        return _entries_from_legacy(lp["top_logprobs"])
    raise NoLogprobs()


def label_distribution(top: list[tuple[str, float]], labels: tuple[str, ...]
                       ) -> tuple[dict[str, float], float, float]:
    """Renormalised label probs, raw label mass, and the mass the server did not show."""
    raw = {lab: 0.0 for lab in labels}
    seen = 0.0
    for tok, p in top:
        seen += p
        key = tok.strip()
        if key in raw:
            raw[key] += p
    mass = sum(raw.values())
    probs = {lab: (p / mass if mass > 0 else 0.0) for lab, p in raw.items()}
    return probs, min(mass, 1.0), max(0.0, 1.0 - seen)


def generated_positions(payload: dict[str, Any]) -> list[tuple[str, list[tuple[str, float]]]]:
    """Every generated position as ``(token text, top (token, probability) pairs)``, in order.

    Chat shape: ``logprobs.content[i] = {token, logprob, top_logprobs}``; legacy completions:
    ``logprobs.tokens[i]`` with ``logprobs.top_logprobs[i] = {token: logprob}``."""
    lp = _logprobs_object(payload)
    if isinstance(lp.get("content"), list):
        return [(str(item.get("token", "")) if isinstance(item, dict) else "",
                 _entries_from_content([item]) if isinstance(item, dict) else []) for item in lp["content"]]
    tops, tokens = lp.get("top_logprobs"), lp.get("tokens")
    if not isinstance(tops, list):
        raise NoLogprobs()
    if not isinstance(tokens, list) or len(tokens) != len(tops):
        raise MalformedLogprobs("logprobs.tokens does not match logprobs.top_logprobs")
    return [(str(tok), [(str(t), _prob(v)) for t, v in (top or {}).items()] if isinstance(top, dict) else [])
            for tok, top in zip(tokens, tops)]


def joint_slot_tops(positions: list[tuple[str, list[tuple[str, float]]]], headers: list[str], *,
                    first_at_start: bool) -> list[tuple[list[tuple[str, float]] | None, str, str | None]]:
    """For each slot header (in order) the top pairs of the token right after it in the generated
    text, the token written there, and why it cannot be read (None when it can).

    ``first_at_start``: the prompt already ended at the first header (a prefilled completion), so
    the first slot is the first generated position; otherwise every header is searched for. A
    header the text never reaches, or that runs into the next token (no token starts right after
    it), is unreadable."""
    starts, text = [], ""
    for tok, _ in positions:
        starts.append(len(text))
        text += tok
    at = {start: i for i, start in reversed(list(enumerate(starts)))}
    out: list[tuple[list[tuple[str, float]] | None, str, str | None]] = []
    cursor = 0
    for n, header in enumerate(headers):
        if n == 0 and first_at_start:
            end = 0
        else:
            key = header.strip().split("\n")[-1].strip()
            found = text.find(key, cursor)
            if found < 0:
                out.append((None, "", "the joint reply never wrote its header"))
                continue
            end = found + len(key)
        i = at.get(end)
        cursor = end
        if i is None:
            problem = ("the joint reply ended at its header" if end >= len(text)
                       else "the joint reply ran its header into the grade (no token starts after it)")
            out.append((None, "", problem))
            continue
        out.append(_through_whitespace(positions, i))
    return out


def _through_whitespace(positions: list[tuple[str, list[tuple[str, float]]]], i: int
                        ) -> tuple[list[tuple[str, float]], str, None]:
    """The slot at position ``i``: its top pairs and the token written there, and when that token is a
    bare space or newline (small models write one before the grade), the grade read one position on.

    The label's probability is then the sum over both paths: P(label) at the slot, plus P(the written
    whitespace) times P(label) after it (the path of any other whitespace token is not observed)."""
    token, top = positions[i]
    if token.strip() or i + 1 >= len(positions):
        return top, token.strip(), None
    p_ws = sum(p for t, p in top if t == token)
    after_token, after = positions[i + 1]
    return [(t, p) for t, p in top if t != token] + [(t, p_ws * p) for t, p in after], after_token.strip(), None


def whitespace_paths(top: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """The whitespace tokens at a slot worth following: ``[(" ", 0.2), ...]`` (see ``WHITESPACE_MIN_PROB``)."""
    return [(t, p) for t, p in top if t in WHITESPACE_TOKENS and p >= WHITESPACE_MIN_PROB]


def through_whitespace(top: list[tuple[str, float]], after: dict[str, list[tuple[str, float]]]
                       ) -> list[tuple[str, float]]:
    """The slot's pairs with each followed whitespace token replaced by what comes after it, weighted:
    P(label) = P(label at the slot) + sum over w of P(w) * P(label | w), the embedded model's rule."""
    out = [(t, p) for t, p in top if t not in after]
    for ws, rest in after.items():
        p_ws = sum(p for t, p in top if t == ws)
        out += [(t, p_ws * q) for t, q in rest]
    return out
