"""TEST DOUBLE — a deterministic scripted scoring model for logic tests only.

It is never a product default. It grades by looking for the marker ``GOOD`` in the text of the
slot's own response, so verdict logic (repeats, slot order, aggregation, failures) can be tested
without a real model::

    m = ScriptedScoreModel()
    m.fail_when = lambda req: "Errors" in req.messages[-1].content   # make chosen calls fail
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable

from veriscale.errors import ModelCallError
from veriscale.models.base import ChatResponse, ScoreRequest, ScoreResponse


class ScriptedScoreModel:
    is_embedded = False
    uri = "scripted:test-double"
    display_name = "scripted test double"

    def __init__(self, mass: float = 0.9) -> None:
        self.mass = mass
        self.calls: list[ScoreRequest] = []
        self.fail_when: Callable[[ScoreRequest], bool] = lambda req: False

    def fingerprint(self) -> str:
        return "scripted:v1"

    def context_size(self) -> int:
        return 100_000

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def single_token_labels(self, labels: tuple[str, ...]) -> list[str]:
        return [lab for lab in labels if len(lab) > 3]

    def _slot_text(self, req: ScoreRequest) -> str:
        user = req.messages[-1].content
        if "## First response" not in user:
            return user.split("## Response", 1)[1].split("## Criterion", 1)[0]
        first = user.split("## First response", 1)[1].split("## Second response", 1)[0]
        second = user.split("## Second response", 1)[1].split("## Criterion", 1)[0]
        return first if "first response" in req.prefill else second

    def score(self, request: ScoreRequest) -> ScoreResponse:
        self.calls.append(request)
        if self.fail_when(request):
            raise ModelCallError("scripted failure")
        good = "GOOD" in self._slot_text(request)
        labels = request.labels
        best, worst = labels[0], labels[-1]
        dist = {lab: 0.0 for lab in labels}
        dist[best if good else worst] = 0.8
        dist[labels[len(labels) // 2]] = 0.2
        return ScoreResponse(label_probs=dist, label_mass=self.mass, unseen_mass=0.0,
                             prompt_tokens=10, prompt_tokens_total=10)

    def chat(self, messages: list[dict[str, Any]], **kw: Any) -> ChatResponse:
        return ChatResponse(content="scripted analysis")


@contextmanager
def registered_scheme(name: str, parse: Callable[[str], Any], forms: tuple[str, ...]) -> Iterator[None]:
    """Model URIs of scheme ``name`` built by ``parse`` while the block runs; the backend registry
    is as it was afterwards (a test fixture: ``with registered_scheme("scripted", ...): yield``)."""
    from veriscale.models.registry import SCHEMES, register_backend

    saved = dict(SCHEMES)
    register_backend((name,), parse, forms=forms)
    try:
        yield
    finally:
        SCHEMES.clear()
        SCHEMES.update(saved)
