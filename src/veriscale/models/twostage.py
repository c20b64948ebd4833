"""Two-stage scoring for models without logprobs.

Stage 1: a reasoner (any chat model, e.g. a closed API) writes an analysis of the candidate(s).
Stage 2: a scorer with logprobs reads the same prompt plus that analysis and gives the label
distribution at the score slot::

    m = TwoStageModel(reasoner=OpenAICompatModel(...), scorer=EmbeddedModel.load())
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from veriscale.models.base import ChatResponse, Message, ModelBackend, ScoreRequest, ScoreResponse

ANALYSIS_INSTRUCTION = (
    "Write a short analysis (under 150 words) of how well the response(s) meet the criterion. "
    "Do not give a grade."
)


class TwoStageModel:
    """Reasoner writes, scorer grades; the fingerprint covers both models."""

    is_embedded = False

    def __init__(self, reasoner: ModelBackend, scorer: ModelBackend, uri: str = "") -> None:
        self.reasoner = reasoner
        self.scorer = scorer
        self.uri = uri or f"twostage:{reasoner.uri}+{scorer.uri}"
        self.display_name = f"{reasoner.display_name} → {scorer.display_name}"

    def fingerprint(self) -> str:
        return f"twostage:{self.reasoner.fingerprint()}+{self.scorer.fingerprint()}"

    def context_size(self) -> int | None:
        return self.scorer.context_size()

    def count_tokens(self, text: str) -> int:
        return self.scorer.count_tokens(text)

    def single_token_labels(self, labels: tuple[str, ...]) -> list[str]:
        return self.scorer.single_token_labels(labels)

    def score(self, request: ScoreRequest) -> ScoreResponse:
        start = time.perf_counter()
        msgs = [{"role": m.role, "content": m.content} for m in request.messages]
        msgs[-1] = {"role": msgs[-1]["role"], "content": msgs[-1]["content"] + "\n\n" + ANALYSIS_INSTRUCTION}
        analysis = self.reasoner.chat(msgs, max_tokens=request.max_reasoning_tokens,
                                      temperature=request.temperature if request.reasoning else 0.0)
        user = request.messages[-1]
        with_analysis = request.messages[:-1] + (Message(user.role, user.content + "\n\n## Analysis by a reviewer\n" + analysis.content.strip()),)
        resp = self.scorer.score(dataclasses.replace(request, messages=with_analysis, reasoning=False))
        resp.reasoning = analysis.content.strip()
        resp.completion_tokens += analysis.completion_tokens
        resp.latency_s = time.perf_counter() - start
        return resp

    def chat(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
             max_tokens: int = 512, temperature: float = 0.0) -> ChatResponse:
        return self.reasoner.chat(messages, tools=tools, max_tokens=max_tokens, temperature=temperature)
