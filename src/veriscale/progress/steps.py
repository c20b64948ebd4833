"""Causal step rendering: each step is rendered once, from itself alone, and never changes.

A checkpoint after step t shows steps 1..t and nothing derived from later steps, the
trajectory's length or its outcome. Shown steps only grow at the end, so each checkpoint's
prompt extends the previous one. When the steps no longer fit the budget, the oldest middle
steps are elided once (the first step stays): the new prompt is processed in full once, which
``rerenders`` counts, and later checkpoints extend it again::

    log = StepLog(count_tokens=model.count_tokens, budget_tokens=6000, step_tokens=500)
    log.append(Step(role="agent", text="ls", observation="a.txt"))
    log.parts()        # ['<<<STEP ...>>>\\n[step 1] agent\\nls\\n[output]\\na.txt\\n<<<END STEP ...>>>']
    log.rerenders      # how many times an overflow re-rendered the shown steps

Images: a step's images (``Step.images``: screenshots, camera frames) are read once when the step
is added (``veriscale.data.images.load_images``) and shown right after its fenced block
(:meth:`StepLog.shown`). A step may be frames only (empty text: a robot rollout). For the budget
each image counts as :data:`IMAGE_TOKENS` tokens plus its label line. Elision takes a step's
images with its text -- frames are what fills the budget, so keeping them would not make room --
and the marker says how many images went with the steps (``[... 3 steps elided (steps 2–4),
with their 3 images ...]``); the first step keeps its images, as it keeps its text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from veriscale.models.vision_probe import DEFAULT_IMAGE_TOKENS
from veriscale.data.images import ImagePart, load_images
from veriscale.data.model import Step
from veriscale.data.step_selection import steps_marker
from veriscale.data.step_text import render_step
from veriscale.data.truncate import TokenCounter, estimate_tokens
from veriscale.progress.prompt import Shown, image_parts, step_block

DEFAULT_STEP_TOKENS = 500
#: After an overflow the shown steps are cut to this share of the step budget, so the next
#: overflow is many steps away and the re-render cost stays a small part of the run's cost.
REFILL_SHARE = 0.5
#: What one image costs in the budget, in tokens, when nothing better is known (a model's own
#: figure may replace it later); its label line is counted as text on top.
IMAGE_TOKENS = DEFAULT_IMAGE_TOKENS  # the judge gives the cost models check measured, where it did


def images_tokens(images: tuple[ImagePart, ...] | list[ImagePart], count: TokenCounter,
                  per_image: int = IMAGE_TOKENS) -> int:
    """What ``images`` add to a prompt for the budget: ``per_image`` each, and their label lines."""
    text = "".join(p for p in image_parts(images) if isinstance(p, str))
    return len(images) * per_image + (count(text) if text else 0)


@dataclass
class StepLog:
    """The rendered steps of one trajectory so far, and which of them a prompt shows."""

    count_tokens: TokenCounter = estimate_tokens
    budget_tokens: int = 6000  # for the shown steps, markers included
    step_tokens: int = DEFAULT_STEP_TOKENS  # at most this much per step
    blocks: list[str] = field(default_factory=list)  # fenced step t at index t-1, fixed once made
    sizes: list[int] = field(default_factory=list)  # tokens of step t, its images included
    elided_through: int = 1  # steps 2..elided_through are elided (none while it is 1)
    rerenders: int = 0
    images: list[tuple[ImagePart, ...]] = field(default_factory=list)  # step t's images at index t-1
    task_images: tuple[ImagePart, ...] = ()  # shown after the task (the judge counts them outside the budget)
    image_tokens: int = IMAGE_TOKENS  # what one image costs in the prompt

    def append(self, step: Step) -> bool:
        """Add the next step; True when the shown steps had to be re-rendered to fit."""
        number = len(self.blocks) + 1
        images = load_images(step.images) if step.images else ()
        block = step_block(render_step(number, step, self.step_tokens, self.count_tokens))
        self.blocks.append(block)
        self.images.append(images)
        self.sizes.append(self.count_tokens(block) + 2 + (images_tokens(images, self.count_tokens, self.image_tokens) if images else 0))
        if self._shown_tokens() <= self.budget_tokens:
            return False
        self._elide(int(self.budget_tokens * REFILL_SHARE))
        self.rerenders += 1
        return True

    def __len__(self) -> int:
        return len(self.blocks)

    def _marker(self) -> str:
        if self.elided_through < 2:
            return ""
        marker = steps_marker(2, self.elided_through)
        gone = sum(len(imgs) for imgs in self.images[1:self.elided_through])
        if gone:
            noun = "image" if gone == 1 else "images"
            marker = f"{marker.removesuffix(' ...]')}, with their {gone} {noun} ...]"
        return marker

    def _shown_tokens(self) -> int:
        marker = self._marker()
        shown = self.sizes[:1] + self.sizes[self.elided_through:]
        return sum(shown) + (self.count_tokens(marker) + 2 if marker else 0)

    def _elide(self, target: int) -> None:
        """Move the elision forward (never back) until the shown steps fit ``target``."""
        last = len(self.blocks)
        while self.elided_through < last - 1 and self._shown_tokens() > target:
            self.elided_through += 1

    def parts(self) -> list[str]:
        """The text the prompt shows now: step 1, the elision marker if any, the later steps."""
        if not self.blocks:
            return []
        marker = self._marker()
        return [self.blocks[0], *([marker] if marker else []), *self.blocks[self.elided_through:]]

    def shown(self) -> list[Shown]:
        """:meth:`parts` with each shown step's images after it (a step without images: its text alone)."""
        if not self.blocks:
            return []
        numbers = [1, *([0] if self._marker() else []), *range(self.elided_through + 1, len(self.blocks) + 1)]
        return [text if not n or not self.images[n - 1] else (text, self.images[n - 1])
                for n, text in zip(numbers, self.parts())]

    def shown_images(self) -> list[ImagePart]:
        """The images the prompt shows now, in order (the task's first)."""
        out = list(self.task_images)
        for part in self.shown():
            if not isinstance(part, str):
                out += part[1]
        return out
