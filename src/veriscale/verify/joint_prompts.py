"""Joint judge prompts: one call asks for every criterion's grade, each read at its own slot.

The layout is instructions, the criteria (listed once), the fenced task and candidates (the
data-block rule of ``verify.prompts``), then the reply format: a run of ``Name: <grade>`` lines
in the listed order. Everything before the first response is the same in every joint request of
a selection, and a pivot is shown first in its meetings, so a server's prefix cache processes the
instructions, criteria and task once and a pivot's text once per round
(``benchmarks/bench_joint_tokens.py``: joint processes 0.69–0.72 of separate scoring's prompt
tokens on held-out Terminal-Bench pools, against 0.89 with the criteria after the data). The prefill ends at the first slot's header and ``ScoreRequest.joint``
holds every further header, so a backend reads each slot's distribution where it stands::

    req = joint_pointwise_request(task, cand, crits.items, crits.note, scale)
    req.prefill, req.joint        # ('Correctness:', ('\\nOutput:', '\\nErrors:'))
    req = joint_pairwise_request(task, first, second, crits.items, crits.note, scale)
    req.prefill                   # 'First response\\nCorrectness:'
    req.joint                     # ('\\nOutput:', ..., '\\nSecond response\\nCorrectness:', ...)
    joint_slots(crits.items, pairwise=True)   # [('Correctness', 'A'), ..., ('Correctness', 'B'), ...]

A pair is graded response by response (every criterion for the first, then every criterion for
the second), not criterion by criterion: each response's grades stay together as in the separate
layout, which asks one response at a time, and an interleaved layout would invite grading the
second response *relative to* the first on each line. Later slots still condition on the
model's own earlier grades (the written label is part of the context): the trade-off is stated
in docs/PERFORMANCE.md ("Joint scoring").
"""

from __future__ import annotations

from collections.abc import Sequence

from veriscale.fence import DATA_RULE, fence
from veriscale.models.base import Message, ScoreRequest
from veriscale.verify.criteria import Criterion
from veriscale.verify.prompts import SYSTEM
from veriscale.verify.resist import WARNING, candidate_text, warns
from veriscale.verify.scale import Scale

RESPONSE_HEADERS = {"A": "First response", "B": "Second response"}


def _intro(what: str, scale: Scale, note: str, mitigation: str) -> str:
    parts = [what, DATA_RULE] + ([WARNING] if warns(mitigation) else [])
    parts.append(f"{scale.instruction()} Grade every criterion below, each on its own line, in the order given, "
                 "as the criterion's name, a colon and the grade only.")
    if note:
        parts.append(note)
    return "\n".join(parts)


def _criteria_block(criteria: Sequence[Criterion]) -> str:
    return "\n\n".join(f"## Criterion: {c.name}\n{c.description}" for c in criteria)


def _answer_format(criteria: Sequence[Criterion], responses: Sequence[str]) -> str:
    lines = []
    for head in responses:
        if head:
            lines.append(head)
        lines += [f"{c.name}: <grade>" for c in criteria]
    return "Reply in exactly this format:\n" + "\n".join(lines)


def _headers(criteria: Sequence[Criterion], responses: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """The first slot's prefill and every further slot's header."""
    heads = []
    for head in responses:
        for i, c in enumerate(criteria):
            heads.append((f"{head}\n" if head and i == 0 else "") + f"{c.name}:")
    return heads[0], tuple("\n" + h for h in heads[1:])


def _request(user: str, prefill: str, joint: tuple[str, ...], scale: Scale) -> ScoreRequest:
    return ScoreRequest(messages=(Message("system", SYSTEM), Message("user", user)), prefill=prefill,
                        labels=scale.labels, joint=joint)


def joint_slots(criteria: Sequence[Criterion], *, pairwise: bool) -> list[tuple[str, str | None]]:
    """What each slot of a joint request reads, in order: ``(criterion name, "A"/"B" or None)``."""
    sides: tuple[str | None, ...] = ("A", "B") if pairwise else (None,)
    return [(c.name, side) for side in sides for c in criteria]


def joint_pointwise_request(task: str, candidate: str, criteria: Sequence[Criterion], note: str, scale: Scale,
                            *, mitigation: str = "none") -> ScoreRequest:
    """Every criterion of one candidate in one call (slots in ``criteria`` order)."""
    _check(criteria)
    user = "\n\n".join([
        _intro("Below are a task and one response to it. Grade the response on each criterion.",
               scale, note, mitigation),
        _criteria_block(criteria),
        f"## Task\n{fence('TASK', task)}",
        f"## Response\n{fence('RESPONSE', candidate_text(candidate, mitigation))}",
        _answer_format(criteria, [""]) + f"\n(each grade: {scale.hint()})",
    ])
    prefill, joint = _headers(criteria, [""])
    return _request(user, prefill, joint, scale)


def joint_pairwise_request(task: str, first: str, second: str, criteria: Sequence[Criterion], note: str,
                           scale: Scale, *, mitigation: str = "none") -> ScoreRequest:
    """Every criterion of both responses in one call: the first response's grades, then the second's."""
    _check(criteria)
    user = "\n\n".join([
        _intro("Below are a task and two independent responses to it, the first and the second. "
               "Grade each response on its own merits; they may both be good or both be bad.",
               scale, note, mitigation),
        _criteria_block(criteria),
        f"## Task\n{fence('TASK', task)}",
        f"## First response\n{fence('FIRST_RESPONSE', candidate_text(first, mitigation))}",
        f"## Second response\n{fence('SECOND_RESPONSE', candidate_text(second, mitigation))}",
        _answer_format(criteria, [RESPONSE_HEADERS["A"], RESPONSE_HEADERS["B"]])
        + f"\n(each grade: {scale.hint()})",
    ])
    prefill, joint = _headers(criteria, [RESPONSE_HEADERS["A"], RESPONSE_HEADERS["B"]])
    return _request(user, prefill, joint, scale)


def _check(criteria: Sequence[Criterion]) -> None:
    if not criteria:
        raise ValueError("a joint request needs at least one criterion")
