"""Judge prompts, laid out for prefix caching: stable parts first, the varying part last.

Order inside the user message: instructions (with the scale, the data-block rule and the
criteria note), task, candidate(s), criterion, slot question. Task and candidate texts are data:
each sits in a fenced block (:func:`veriscale.fence.fence`) whose tag depends only on the block's
name and text, so a candidate cannot close its section or open a fake ``## Criterion`` or grade
line, and the prompt stays a pure function of its inputs (stable cache keys and KV prefixes).
Scoring C criteria (and both slots of a pair) therefore shares everything up to the criterion,
so the embedded model and server-side prefix caches re-process only the short suffix::

    req = pairwise_request(task, first, second, criterion, note, scale, target="A")
    req.prefill   # 'Grade for the first response:'  -- the score slot comes right after it
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from veriscale.fence import DATA_RULE, fence
from veriscale.models.base import Message, Part, ScoreRequest
from veriscale.verify.criteria import Criterion
from veriscale.verify.resist import WARNING, candidate_text, warns
from veriscale.verify.scale import Scale

PROMPT_VERSION = "v3"  # v3: task and candidates in fenced data blocks
SLOT_NAMES = {"A": "first", "B": "second"}  # words, so no slot name collides with a score label

if TYPE_CHECKING:
    from veriscale.data.images import ImagePart

#: images a verdict sees, by the section they belong to ("task", "candidate", "first", "second")
Images = Mapping[str, Sequence["ImagePart"]]

SYSTEM = (
    "You are a strict, careful verifier. You grade work done by an AI assistant or agent "
    "against one criterion at a time. You never reward confident claims that the evidence "
    "does not support."
)

def _intro(what: str, scale: Scale, note: str, reasoning: bool, mitigation: str = "none") -> str:
    """The stable opening: what to do and how to answer (shared by every criterion and slot)."""
    if reasoning:
        how = ("For each grade, first write a short analysis (under 120 words), then write "
               "'Grade:' followed by the grade.")
    else:
        how = "Reply with the grade only."
    parts = [what, DATA_RULE] + ([WARNING] if warns(mitigation) else []) + [f"You will be asked for one grade at a time, on one criterion. {scale.instruction()} {how}"]
    if note:
        parts.append(note)
    return "\n".join(parts)


def _criterion_block(criterion: Criterion) -> str:
    return f"## Criterion: {criterion.name}\n{criterion.description}"


def _with_images(section: str, images: Sequence["ImagePart"]) -> list[Part]:
    """A section followed by its images in order, each introduced by its name (a frame's time)."""
    if not images:
        return [section]
    parts: list[Part] = [section, f"\n{len(images)} image(s) shown with it, in order:"]
    for i, img in enumerate(images, 1):
        label = _image_label(img.label)
        parts += [f"\n({i}) {label}:\n" if label else f"\n({i})\n", img]
    return parts


def _image_label(label: str) -> str:
    """An image's name as the prompt shows it, outside any data block: one short line, without the
    characters that open a heading or a block (a file name comes from the run, so it is untrusted)."""
    return re.sub(r"\s+", " ", re.sub(r"[#<>`]", "", label)).strip()[:80]


def _shown_in(section: str, images: Sequence["ImagePart"]) -> tuple["ImagePart", ...]:
    """``images`` marked with the section they follow, which the dashboard shows beside each one."""
    return tuple(replace(img, section=section) for img in images)


def _user(sections: list[tuple[str, Sequence["ImagePart"]]]) -> Message:
    """The user message: sections joined by blank lines, each with its images (none: plain text)."""
    parts: list[Part] = []
    for i, (text, images) in enumerate(sections):
        parts += (["\n\n"] if i else []) + _with_images(text, images)
    return Message.with_parts("user", parts)


def _request(user: str | Message, prefill: str, scale: Scale, reasoning: bool, seed: int | None,
             temperature: float) -> ScoreRequest:
    return ScoreRequest(
        messages=(Message("system", SYSTEM), user if isinstance(user, Message) else Message("user", user)),
        prefill=prefill,
        labels=scale.labels,
        reasoning=reasoning,
        temperature=temperature if reasoning else 0.0,
        seed=seed if reasoning else None,
    )


def pointwise_request(task: str, candidate: str, criterion: Criterion, note: str, scale: Scale,
                      *, reasoning: bool = False, seed: int | None = None,
                      temperature: float = 0.7, mitigation: str = "none", images: Images | None = None
                      ) -> ScoreRequest:
    """One score slot for a single candidate on one criterion (``mitigation``: see ``verify.resist``;
    ``images``: the task's and the candidate's, each shown after its text)."""
    im = images or {}
    user = _user([
        (_intro("Below are a task and one response to it. Grade the response.", scale, note, reasoning, mitigation), ()),
        (f"## Task\n{fence('TASK', task)}", _shown_in("Task", im.get("task", ()))),
        (f"## Response\n{fence('RESPONSE', candidate_text(candidate, mitigation))}", _shown_in("Response", im.get("candidate", ()))),
        (_criterion_block(criterion), ()),
        (f"Grade the response on this criterion ({scale.hint()}).", ()),
    ])
    return _request(user, "Grade:", scale, reasoning, seed, temperature)


def pairwise_request(task: str, first: str, second: str, criterion: Criterion, note: str,
                     scale: Scale, *, target: str, reasoning: bool = False,
                     seed: int | None = None, temperature: float = 0.7, mitigation: str = "none",
                     images: Images | None = None) -> ScoreRequest:
    """One score slot for the response in slot ``target`` ("A" = first, "B" = second); ``images``: the
    task's, the first response's and the second's (keys "task", "first", "second")."""
    if target not in ("A", "B"):
        raise ValueError("target must be 'A' or 'B'")
    im = images or {}
    user = _user([
        (_intro("Below are a task and two independent responses to it, the first and the second. "
                "Grade each response on its own merits; they may both be good or both be bad.",
                scale, note, reasoning, mitigation), ()),
        (f"## Task\n{fence('TASK', task)}", _shown_in("Task", im.get("task", ()))),
        (f"## First response\n{fence('FIRST_RESPONSE', candidate_text(first, mitigation))}", _shown_in("First response", im.get("first", ()))),
        (f"## Second response\n{fence('SECOND_RESPONSE', candidate_text(second, mitigation))}", _shown_in("Second response", im.get("second", ()))),
        (_criterion_block(criterion), ()),
        (f"Grade the {SLOT_NAMES[target]} response on this criterion ({scale.hint()}).", ()),
    ])
    return _request(user, f"Grade for the {SLOT_NAMES[target]} response:", scale, reasoning, seed, temperature)


def probe_request(scale: Scale) -> ScoreRequest:
    """A question any model can grade, to see whether it returns label probabilities at all
    (``veriscale models check``, the proxy's start-up check of its verifier)."""
    return ScoreRequest(messages=(Message("user", "Is 2 + 2 equal to 4? " + scale.instruction()),),
                        prefill="Grade:", labels=scale.labels)
