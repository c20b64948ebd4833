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
"""

from __future__ import annotations

from dataclasses import dataclass, field

from veriscale.data.model import Step
from veriscale.data.step_selection import steps_marker
from veriscale.data.step_text import render_step
from veriscale.data.truncate import TokenCounter, estimate_tokens
from veriscale.progress.prompt import step_block

DEFAULT_STEP_TOKENS = 500
#: After an overflow the shown steps are cut to this share of the step budget, so the next
#: overflow is many steps away and the re-render cost stays a small part of the run's cost.
REFILL_SHARE = 0.5


@dataclass
class StepLog:
    """The rendered steps of one trajectory so far, and which of them a prompt shows."""

    count_tokens: TokenCounter = estimate_tokens
    budget_tokens: int = 6000  # for the shown steps, markers included
    step_tokens: int = DEFAULT_STEP_TOKENS  # at most this much per step
    blocks: list[str] = field(default_factory=list)  # fenced step t at index t-1, fixed once made
    sizes: list[int] = field(default_factory=list)
    elided_through: int = 1  # steps 2..elided_through are elided (none while it is 1)
    rerenders: int = 0

    def append(self, step: Step) -> bool:
        """Add the next step; True when the shown steps had to be re-rendered to fit."""
        number = len(self.blocks) + 1
        block = step_block(render_step(number, step, self.step_tokens, self.count_tokens))
        self.blocks.append(block)
        self.sizes.append(self.count_tokens(block) + 2)
        if self._shown_tokens() <= self.budget_tokens:
            return False
        self._elide(int(self.budget_tokens * REFILL_SHARE))
        self.rerenders += 1
        return True

    def __len__(self) -> int:
        return len(self.blocks)

    def _marker(self) -> str:
        return steps_marker(2, self.elided_through) if self.elided_through >= 2 else ""

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
        """What the prompt shows now: step 1, the elision marker if any, the later steps."""
        if not self.blocks:
            return []
        marker = self._marker()
        return [self.blocks[0], *([marker] if marker else []), *self.blocks[self.elided_through:]]
