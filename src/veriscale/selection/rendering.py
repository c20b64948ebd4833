"""Render tasks and candidates for one tokenizer, each text once.

    renderer = Renderer.for_model(model)     # a server's tokenizer: each text tokenised once, cut at offsets
    renderer = Renderer(model.count_tokens)  # any counter: memoised
    text = renderer.candidate(candidate, 256)   # render_candidate under 256 tokens; asking again is free
    renderer.count(text)                       # its tokens: every distinct text is tokenised once
    RenderedPool(task, candidates, task_text, texts, groups)   # a selection's inputs as rendered
    tokenizer_requests(model)                  # tokenizer requests the model's backend sent so far

A selection plan, and a bench over many configurations, share one renderer, so the same
candidate under the same budget is never rendered or tokenised twice. With a backend that gives
token ids (``token_spans()``: an OpenAI-compatible server's /tokenize), a cut is made at token
offsets found once per text instead of being searched by counting each try
(``veriscale.data.token_spans``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from veriscale.data.images import ImagePart
from veriscale.data.model import Candidate, Task
from veriscale.data.render import render_candidate, render_task
from veriscale.data.token_spans import TokenSpans
from veriscale.data.truncate import TokenCounter
from veriscale.models.abilities import ServerTokenizer


@dataclass(frozen=True)
class RenderedPool:
    """The selection's inputs as the judge reads them; ``groups[i]`` equal = identical rendered output."""

    task: Task
    candidates: tuple[Candidate, ...]
    task_text: str
    texts: tuple[str, ...]
    groups: tuple[str, ...]
    #: the images the judge sees with the task, and with each candidate (loaded and resized; empty: none)
    task_images: tuple[ImagePart, ...] = ()
    images: tuple[tuple[ImagePart, ...], ...] = ()

    def images_of(self, *indices: int) -> dict[str, tuple[ImagePart, ...]] | None:
        """The ``images`` a verdict over these candidates passes the verifier (keys "task" and "candidate",
        or "a" and "b"); None when nothing here has an image."""
        if not self.task_images and not any(self.images):
            return None
        mine = [self.images[i] if self.images else () for i in indices]
        keys = ("candidate",) if len(indices) == 1 else ("a", "b")
        return {"task": self.task_images, **dict(zip(keys, mine))}



def model_counter(model: Any) -> TokenCounter:
    """The counter to render for ``model`` with: its ``TokenSpans`` where it has one, else ``count_tokens``."""
    found = model.token_spans() if isinstance(model, ServerTokenizer) else None
    counter: TokenCounter = found if found is not None else model.count_tokens
    return counter


def tokenizer_requests(model: Any) -> int:
    """Tokenizer requests ``model``'s backend sent so far (0 for one that tokenises in process)."""
    return int(model.tokenizer_requests()) if isinstance(model, ServerTokenizer) else 0


class Renderer:
    """Memoised ``render_candidate`` / ``render_task`` over a memoised token counter."""

    def __init__(self, count_tokens: TokenCounter) -> None:
        # a TokenSpans memoises its own counts (and must see render's texts as they are)
        self.count: TokenCounter = count_tokens if isinstance(count_tokens, TokenSpans) else functools.cache(count_tokens)
        self._rendered: dict[tuple[int, int], tuple[Candidate, str]] = {}

    @classmethod
    def for_model(cls, model: Any) -> "Renderer":
        """A renderer over ``model``'s own tokenizer (:func:`model_counter`)."""
        return cls(model_counter(model))

    def candidate(self, candidate: Candidate, budget_tokens: int) -> str:
        """What the verifier reads about ``candidate`` within ``budget_tokens``."""
        key = (id(candidate), budget_tokens)
        if key not in self._rendered:  # the candidate is kept with its text, so its id stays its own
            self._rendered[key] = (candidate, render_candidate(candidate, budget_tokens, self.count))
        return self._rendered[key][1]

    def task(self, task: Task, budget_tokens: int | None = None) -> str:
        """The task text, cut head and tail to ``budget_tokens`` when given and exceeded."""
        return render_task(task, budget_tokens, self.count)
