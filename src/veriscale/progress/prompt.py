"""The progress prompt: how much of the task the steps so far have done, on a G-label scale.

Laid out so each checkpoint's prompt extends the previous one: instructions, the task, then one
fenced block per step in order, and only then the question. Checkpoint t+1 shares every token
up to the end of step t with checkpoint t, so the embedded model's KV cache and server prefix
caches re-process just the new step and the question::

    scale = progress_scale("digits")              # 9 = 100 % done ... 1 = 0 %; any G: letters:11, digits:5
    req = progress_request(task_text, ["[step 1] agent\\nls", "[step 2] agent\\nmake"], scale)
    req.prefill                                     # 'Progress: ' -- the score slot follows it

Images (screenshots, camera or video frames) sit right after the block they belong to: a step's
after its fenced step block, the task's after the fenced task, each introduced by its label. A
shown part is then ``(block_text, images)`` instead of a string; the user message becomes text and
image parts in order (``Message.with_parts``), so checkpoint t+1 still shares every part up to the
end of step t (and its frames) with checkpoint t. Without images the prompt is the text it always
was, byte for byte::

    req = progress_request(task, [(step_block("[step 1] environment\nframe 1 at 0.00 s"), [frame_1])],
                           scale, task_images=[goal])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Union

from veriscale.fence import DATA_RULE, fence
from veriscale.models.base import Message, Part, ScoreRequest
from veriscale.verify.scale import Scale, parse_scale

if TYPE_CHECKING:
    from veriscale.data.images import ImagePart

#: one shown part of the steps: a fenced step or a marker line, alone or with the images shown after it
Shown = Union[str, tuple[str, Sequence["ImagePart"]]]

PROGRESS_PROMPT_VERSION = "progress-v1"  # the prompt layout and words; part of every cache key
DEFAULT_PROGRESS_SCALE = "digits"  # 9 = 100 % done ... 1 = 0 %: small models put more mass on digits after "Progress:"

SYSTEM = (
    "You watch an AI agent work on a task and judge, from the steps it has taken so far, how "
    "much of the task is done. You credit only what the steps show was achieved, not what the "
    "agent says it will do or claims without evidence."
)


def progress_scale(spec: Scale | str = DEFAULT_PROGRESS_SCALE) -> Scale:
    """A score scale whose best label means 100 % done and whose worst means no progress."""
    scale = parse_scale(spec) if isinstance(spec, str) else spec
    if scale.name == "yesno":
        return dataclasses.replace(scale, best_description="the task is done",
                                   worst_description="the task is not done yet")
    return dataclasses.replace(scale, best_description="the task is completely done (100 %)",
                               worst_description="no progress toward the goal yet (0 %)")


def percent_key(scale: Scale) -> str:
    """'A = 100 %, B = 90 %, ...' for scales of up to 21 levels ('' otherwise)."""
    if scale.name == "yesno" or scale.granularity > 21:
        return ""
    return "Levels: " + ", ".join(f"{lab} = {round(100 * scale.value(lab))} %" for lab in scale.labels) + "."


def head_text(task: str, scale: Scale, *, reasoning: bool) -> str:
    """Everything before the first step: instructions and the fenced task (fixed for a run)."""
    return f"{task_section(task, scale, reasoning=reasoning)}\n\n{STEPS_HEADING}"


STEPS_HEADING = "## Steps so far"


def task_section(task: str, scale: Scale, *, reasoning: bool) -> str:
    """Instructions and the fenced task: what the task's images follow."""
    how = ("First write a short analysis (under 120 words), then write 'Progress:' followed by the grade."
           if reasoning else "Reply with the grade only.")
    intro = "\n".join(part for part in (
        "Below are a task and the steps an AI agent has taken on it so far, oldest first. The agent "
        "may still be working. Judge how much of the task the steps so far have actually done.",
        DATA_RULE,
        f"{scale.instruction()} {percent_key(scale)} {how}".replace("  ", " "),
    ) if part)
    return f"{intro}\n\n## Task\n{fence('TASK', task)}"


def step_block(rendered_step: str) -> str:
    """One step as a data block (its tag depends on its own text only)."""
    return fence("STEP", rendered_step)


def image_parts(images: Sequence["ImagePart"]) -> list[Part]:
    """Images shown after a block, in order, each on its own line after its label (none: nothing)."""
    parts: list[Part] = []
    for i, img in enumerate(images, 1):
        parts += [f"\n(image {i}) {img.label}:\n" if img.label else f"\n(image {i})\n", img]
    return parts


def question_text(scale: Scale) -> str:
    return f"## Question\nFrom these steps alone, how much of the task is done? ({scale.hint()})"


def prefill_for(scale: Scale) -> str:
    """'Progress:' and, for digit labels, the space before them.

    Tokenizers split ' 7' into a space and a digit (letters keep ' A' as one token), so for
    digits the slot must come after the space: there the next token is the label itself, for a
    server's top logprobs as for the in-process model.
    """
    return "Progress: " if scale.labels[0].isdigit() else "Progress:"


def progress_request(task: str, step_texts: Sequence[Shown], scale: Scale, *, reasoning: bool = False,
                     seed: int | None = None, temperature: float = 0.7,
                     task_images: Sequence["ImagePart"] = ()) -> ScoreRequest:
    """The score request of one checkpoint; ``step_texts`` are the parts shown, in order.

    A part is a fenced step (:func:`step_block`) or an elision marker line written by veriscale,
    or ``(part, images)``: the part with the images shown right after it. ``task_images`` follow
    the fenced task.
    """
    goal = tuple(dataclasses.replace(img, section="Task") for img in task_images)
    parts: list[Part] = [task_section(task, scale, reasoning=reasoning), *image_parts(goal),
                         f"\n\n{STEPS_HEADING}"]
    for shown in step_texts:
        text, images = (shown, ()) if isinstance(shown, str) else shown
        parts += ["\n\n", text, *image_parts(images)]
    parts += ["\n\n", question_text(scale)]
    return ScoreRequest(
        messages=(Message("system", SYSTEM), Message.with_parts("user", parts)),
        prefill=prefill_for(scale),
        labels=scale.labels,
        reasoning=reasoning,
        temperature=temperature if reasoning else 0.0,
        seed=seed if reasoning else None,
    )
