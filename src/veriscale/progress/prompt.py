"""The progress prompt: how much of the task the steps so far have done, on a G-label scale.

Laid out so each checkpoint's prompt extends the previous one: instructions, the task, then one
fenced block per step in order, and only then the question. Checkpoint t+1 shares every token
up to the end of step t with checkpoint t, so the embedded model's KV cache and server prefix
caches re-process just the new step and the question::

    scale = progress_scale("digits")              # 9 = 100 % done ... 1 = 0 %; any G: letters:11, digits:5
    req = progress_request(task_text, ["[step 1] agent\\nls", "[step 2] agent\\nmake"], scale)
    req.prefill                                     # 'Progress: ' -- the score slot follows it
"""

from __future__ import annotations

import dataclasses

from veriscale.fence import DATA_RULE, fence
from veriscale.models.base import Message, ScoreRequest
from veriscale.verify.scale import Scale, parse_scale

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
    how = ("First write a short analysis (under 120 words), then write 'Progress:' followed by the grade."
           if reasoning else "Reply with the grade only.")
    intro = "\n".join(part for part in (
        "Below are a task and the steps an AI agent has taken on it so far, oldest first. The agent "
        "may still be working. Judge how much of the task the steps so far have actually done.",
        DATA_RULE,
        f"{scale.instruction()} {percent_key(scale)} {how}".replace("  ", " "),
    ) if part)
    return f"{intro}\n\n## Task\n{fence('TASK', task)}\n\n## Steps so far"


def step_block(rendered_step: str) -> str:
    """One step as a data block (its tag depends on its own text only)."""
    return fence("STEP", rendered_step)


def question_text(scale: Scale) -> str:
    return f"## Question\nFrom these steps alone, how much of the task is done? ({scale.hint()})"


def prefill_for(scale: Scale) -> str:
    """'Progress:' and, for digit labels, the space before them.

    Tokenizers split ' 7' into a space and a digit (letters keep ' A' as one token), so for
    digits the slot must come after the space: there the next token is the label itself, for a
    server's top logprobs as for the in-process model.
    """
    return "Progress: " if scale.labels[0].isdigit() else "Progress:"


def progress_request(task: str, step_texts: list[str], scale: Scale, *, reasoning: bool = False,
                     seed: int | None = None, temperature: float = 0.7) -> ScoreRequest:
    """The score request of one checkpoint; ``step_texts`` are the parts shown, in order.

    A part is a fenced step (:func:`step_block`) or an elision marker line written by veriscale.
    """
    user = "\n\n".join([head_text(task, scale, reasoning=reasoning), *step_texts, question_text(scale)])
    return ScoreRequest(
        messages=(Message("system", SYSTEM), Message("user", user)),
        prefill=prefill_for(scale),
        labels=scale.labels,
        reasoning=reasoning,
        temperature=temperature if reasoning else 0.0,
        seed=seed if reasoning else None,
    )
