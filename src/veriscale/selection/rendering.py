"""Render tasks and candidates for one tokenizer, each text once.

    renderer = Renderer(model.count_tokens)
    text = renderer.candidate(candidate, 256)   # render_candidate under 256 tokens; asking again is free
    renderer.count(text)                       # its tokens: every distinct text is tokenised once

A selection plan, and a bench over many configurations, share one renderer, so the same
candidate under the same budget is never rendered or tokenised twice.
"""

from __future__ import annotations

import functools

from veriscale.data.model import Candidate, Task
from veriscale.data.render import TokenCounter, render_candidate, render_task


class Renderer:
    """Memoised ``render_candidate`` / ``render_task`` over a memoised token counter."""

    def __init__(self, count_tokens: TokenCounter) -> None:
        self.count: TokenCounter = functools.cache(count_tokens)
        self._rendered: dict[tuple[int, int], tuple[Candidate, str]] = {}

    def candidate(self, candidate: Candidate, budget_tokens: int) -> str:
        """What the verifier reads about ``candidate`` within ``budget_tokens``."""
        key = (id(candidate), budget_tokens)
        if key not in self._rendered:  # the candidate is kept with its text, so its id stays its own
            self._rendered[key] = (candidate, render_candidate(candidate, budget_tokens, self.count))
        return self._rendered[key][1]

    def task(self, task: Task, budget_tokens: int | None = None) -> str:
        """The task text, cut head and tail to ``budget_tokens`` when given and exceeded."""
        return render_task(task, budget_tokens, self.count)
