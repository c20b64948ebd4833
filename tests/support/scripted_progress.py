"""TEST DOUBLE — a deterministic scripted progress judge for logic tests only (never a default).

It reads the steps a progress prompt shows and answers with all probability on the label
nearest to ``0.25 * (#UP - #DOWN)`` (clamped to [0, 1]), where UP and DOWN are words in the
shown steps. So a test writes the curve it wants into the steps::

    m = ScriptedProgressModel()
    steps = [Step(role="agent", text="UP"), Step(role="agent", text="nothing"), ...]
"""

from __future__ import annotations

import re

from veriscale.errors import ModelCallError
from veriscale.models.base import ScoreRequest, ScoreResponse


class ScriptedProgressModel:
    is_embedded = False
    uri = "scripted:progress-double"
    display_name = "scripted progress test double"

    def __init__(self, context: int = 100_000) -> None:
        self.context = context
        self.calls: list[ScoreRequest] = []
        self.fail_at_step: int | None = None

    def fingerprint(self) -> str:
        return "scripted-progress:v1"

    def context_size(self) -> int:
        return self.context

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def single_token_labels(self, labels: tuple[str, ...]) -> list[str]:
        return []

    @staticmethod
    def shown_steps(request: ScoreRequest) -> str:
        user = request.messages[-1].content
        return user.split("## Steps so far", 1)[1].rsplit("## Question", 1)[0]

    def score(self, request: ScoreRequest) -> ScoreResponse:
        self.calls.append(request)
        shown = self.shown_steps(request)
        numbers = [int(n) for n in re.findall(r"\[step (\d+)\]", shown)]
        if self.fail_at_step is not None and numbers and numbers[-1] == self.fail_at_step:
            raise ModelCallError("scripted failure")
        value = min(max(0.25 * (len(re.findall(r"\bUP\b", shown)) - len(re.findall(r"\bDOWN\b", shown))), 0.0), 1.0)
        labels = request.labels
        nearest = min(labels, key=lambda lab: abs((1.0 - labels.index(lab) / (len(labels) - 1)) - value))
        probs = {lab: (1.0 if lab == nearest else 0.0) for lab in labels}
        tokens = self.count_tokens(request.messages[-1].content)
        return ScoreResponse(label_probs=probs, label_mass=0.9, prompt_tokens=tokens, prompt_tokens_total=tokens)


#: ``python -c CLI_MAIN ...``: veriscale's own entry point with this double registered as the model
#: ``scripted-progress`` (no model to load), for tests that run the CLI as a child process
CLI_MAIN = ("import sys; from tests.support.scripted_progress import ScriptedProgressModel; "
            "from veriscale.models.registry import register_backend; "
            "register_backend(('scripted-progress',), lambda _u: ScriptedProgressModel(), "
            "forms=('scripted-progress',)); "
            "from veriscale.cli import app; sys.argv[0] = 'veriscale'; app()")
