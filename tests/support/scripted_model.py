"""TEST DOUBLE — a deterministic scripted scoring model for logic tests only.

It is never a product default. It grades by looking for the marker ``GOOD`` in the text of the
slot's own response, so verdict logic (repeats, slot order, aggregation, failures) can be tested
without a real model::

    m = ScriptedScoreModel()
    m.fail_when = lambda req: "Errors" in req.messages[-1].content   # make chosen calls fail

A joint request (``ScoreRequest.joint``) gets one entry in ``slots`` per slot, each graded by
the response its header belongs to (``First response`` / ``Second response`` blocks of a pair)::

    m.unreadable_slot = lambda i, req: i == 2     # slot 2 of every joint reply comes back off-format
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable

from veriscale.errors import ModelCallError
from veriscale.models.base import ChatResponse, ScoreRequest, ScoreResponse, slot_entry


class ScriptedScoreModel:
    is_embedded = False
    uri = "scripted:test-double"
    display_name = "scripted test double"

    def supports_joint(self) -> bool:
        return True

    def __init__(self, mass: float = 0.9) -> None:
        self.mass = mass
        self.calls: list[ScoreRequest] = []
        self.fail_when: Callable[[ScoreRequest], bool] = lambda req: False
        self.unreadable_slot: Callable[[int, ScoreRequest], bool] = lambda i, req: False

    def fingerprint(self) -> str:
        return "scripted:v1"

    def context_size(self) -> int:
        return 100_000

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def single_token_labels(self, labels: tuple[str, ...]) -> list[str]:
        return [lab for lab in labels if len(lab) > 3]

    def _slot_text(self, req: ScoreRequest, header: str | None = None) -> str:
        user = req.messages[-1].content
        if "## First response" not in user:
            return user.split("## Response", 1)[1].split("## Criterion", 1)[0]
        first = user.split("## First response", 1)[1].split("## Second response", 1)[0]
        second = user.split("## Second response", 1)[1].split("## Criterion", 1)[0]
        where = (header if header is not None else req.prefill).lower()
        return first if "first response" in where else second

    def _dist(self, labels: tuple[str, ...], good: bool) -> dict[str, float]:
        dist = {lab: 0.0 for lab in labels}
        dist[labels[0] if good else labels[-1]] = 0.8
        dist[labels[len(labels) // 2]] = 0.2
        return dist

    def score(self, request: ScoreRequest) -> ScoreResponse:
        self.calls.append(request)
        if self.fail_when(request):
            raise ModelCallError("scripted failure")
        dist = self._dist(request.labels, "GOOD" in self._slot_text(request))
        slots = []
        if request.joint:
            side = request.prefill
            for i, header in enumerate((request.prefill,) + request.joint):
                side = header if "response" in header else side  # a pair's block header switches the response
                if self.unreadable_slot(i, request):
                    slots.append(slot_entry({lab: 0.0 for lab in request.labels}, 0.0, 0.0, "",
                                            "the reply wrote no grade after this header"))
                    continue
                probs = self._dist(request.labels, "GOOD" in self._slot_text(request, side))
                slots.append(slot_entry(probs, self.mass, 0.0, max(probs, key=probs.get)))
            dist = slots[0]["label_probs"]
        mass = slots[0]["label_mass"] if slots else self.mass
        return ScoreResponse(label_probs=dist, label_mass=mass, unseen_mass=0.0,
                             prompt_tokens=10, prompt_tokens_total=10, slots=slots)

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
