"""Judge prompts, laid out for prefix caching: stable parts first, the varying part last.

Order inside the user message: instructions, task, candidate(s), criterion, slot question.
Scoring C criteria (and both slots of a pair) therefore shares everything up to the criterion,
so the embedded model and server-side prefix caches re-process only the short suffix::

    req = pairwise_request(task, first, second, criterion, note, scale, target="A")
    req.prefill   # 'Grade for the first response:'  -- the score slot comes right after it
"""

from __future__ import annotations

from veriscale.models.base import Message, ScoreRequest
from veriscale.verify.criteria import Criterion
from veriscale.verify.scale import Scale

PROMPT_VERSION = "v1"
SLOT_NAMES = {"A": "first", "B": "second"}  # words, so no slot name collides with a score label

SYSTEM = (
    "You are a strict, careful verifier. You grade work done by an AI assistant or agent "
    "against one criterion at a time. You never reward confident claims that the evidence "
    "does not support."
)

def _criterion_block(criterion: Criterion, note: str) -> str:
    parts = [f"## Criterion: {criterion.name}", criterion.description]
    if note:
        parts.append(note)
    return "\n".join(parts)


def _question(subject: str, scale: Scale, reasoning: bool) -> str:
    if reasoning:
        how = (f"First write a short analysis (under 120 words) of {subject} on this criterion, "
               f"then write 'Grade:' followed by the grade. {scale.instruction()}")
    else:
        how = f"{scale.instruction()} Reply with the grade only."
    return f"Grade {subject} on this criterion only. {how}"


def _request(user: str, prefill: str, scale: Scale, reasoning: bool, seed: int | None,
             temperature: float) -> ScoreRequest:
    return ScoreRequest(
        messages=(Message("system", SYSTEM), Message("user", user)),
        prefill=prefill,
        labels=scale.labels,
        reasoning=reasoning,
        temperature=temperature if reasoning else 0.0,
        seed=seed if reasoning else None,
    )


def pointwise_request(task: str, candidate: str, criterion: Criterion, note: str, scale: Scale,
                      *, reasoning: bool = False, seed: int | None = None,
                      temperature: float = 0.7) -> ScoreRequest:
    """One score slot for a single candidate on one criterion."""
    user = "\n\n".join([
        "Below are a task and one response to it. Grade the response.",
        f"## Task\n{task}",
        f"## Response\n{candidate}",
        _criterion_block(criterion, note),
        _question("the response", scale, reasoning),
    ])
    return _request(user, "Grade:", scale, reasoning, seed, temperature)


def pairwise_request(task: str, first: str, second: str, criterion: Criterion, note: str,
                     scale: Scale, *, target: str, reasoning: bool = False,
                     seed: int | None = None, temperature: float = 0.7) -> ScoreRequest:
    """One score slot for the response in slot ``target`` ("A" = first, "B" = second)."""
    if target not in ("A", "B"):
        raise ValueError("target must be 'A' or 'B'")
    user = "\n\n".join([
        "Below are a task and two independent responses to it, the first and the second. "
        "Grade each response on its own merits; they may both be good or both be bad.",
        f"## Task\n{task}",
        f"## First response\n{first}",
        f"## Second response\n{second}",
        _criterion_block(criterion, note),
        _question(f"the {SLOT_NAMES[target]} response", scale, reasoning),
    ])
    return _request(user, f"Grade for the {SLOT_NAMES[target]} response:", scale, reasoning, seed, temperature)
