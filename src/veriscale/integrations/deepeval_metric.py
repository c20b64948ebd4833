"""A DeepEval metric whose score is veriscale's reward (``pip install 'veriscale[deepeval]'``)::

    from deepeval import assert_test
    from deepeval.test_case import LLMTestCase
    from veriscale.integrations.deepeval_metric import VeriscaleMetric

    metric = VeriscaleMetric(threshold=0.5)                 # the embedded model: a weak judge
    assert_test(LLMTestCase(input="What is 2+2?", actual_output="4"), [metric])

``measure`` / ``a_measure`` score the test case's ``actual_output`` against its ``input`` (the
task) with :func:`veriscale.api.score` / :func:`veriscale.api.ascore` (awaited on DeepEval's loop).
After a measure: ``score`` is the reward in [0, 1]; ``success`` is ``score >= threshold``;
``reason`` is one paragraph (each criterion's reward and likeliest label, the verdict's notes, low
label mass, suspected injection, as ``veriscale score --json`` shows them); ``verbose_logs`` holds
each criterion's label distribution (printed too with ``verbose_mode=True``); ``score_breakdown``
the reward per criterion. A verdict whose model calls failed sets ``error`` and raises
:class:`veriscale.errors.ModelCallError` (DeepEval records it when run with ``ignore_errors``).

Importing this module without DeepEval raises :class:`veriscale.errors.UserError`, one sentence naming
``pip install 'veriscale[deepeval]'``; ``import veriscale`` never imports it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

from veriscale.integrations import require_deepeval

require_deepeval()

from deepeval.metrics import BaseMetric  # noqa: E402
from deepeval.metrics.indicator import metric_progress_indicator  # noqa: E402
from deepeval.metrics.utils import construct_verbose_logs  # noqa: E402

from veriscale.api import ascore, score  # noqa: E402
from veriscale.errors import ModelCallError, UserError  # noqa: E402
from veriscale.verify.results import ScoreResult  # noqa: E402
from veriscale.integrations.verdict_text import reason_for  # noqa: E402

__all__ = ["VeriscaleMetric", "reason_for", "label_logs"]

#: the one sentence for a test case with nothing to score
NO_OUTPUT = ("the DeepEval test case has no actual_output to score: "
             "give LLMTestCase(actual_output=...) the answer the model gave for its input")


def label_logs(verdict: dict[str, Any]) -> list[str]:
    """One line per criterion: its reward, label mass and label distribution (the scale's order)."""
    lines = []
    for name, entry in verdict["criteria"].items():
        reward = entry.get("reward")
        probs = ", ".join(f"{label} {p:.3f}" for label, p in (entry.get("label_probs") or {}).items())
        lines.append(f"{name}: reward {'unscored' if reward is None else f'{reward:.3f}'}, "
                     f"label mass {entry.get('label_mass', 0.0):.3f}"
                     + (" (low)" if entry.get("low_label_mass") else "")
                     + f", label distribution {{{probs or 'none read'}}}")
    return lines


class VeriscaleMetric(BaseMetric):  # type: ignore[misc,unused-ignore]  # BaseMetric is Any without deepeval
    """veriscale's fine-grained reward of ``actual_output`` for ``input``, as a DeepEval metric.

    ``model``: a model URI or backend; the default ``"embedded"`` is the bundled 135M SmolLM2, a weak
    judge that runs anywhere offline (fine for wiring and smoke tests; pass a served model, e.g.
    ``"http://127.0.0.1:8000/v1#judge"``, for real verification). ``criteria``: a built-in set or a
    Markdown file; ``scale``: e.g. ``"letters"``, ``"digits:10"``; ``repeats``: reads per criterion;
    ``threshold``: the reward that passes; ``store``: a store file (a rerun is answered from it).
    ``strict_mode`` makes the score 1 or 0 (threshold 1), as DeepEval's own metrics do.
    """

    def __init__(self, model: Any = "embedded", criteria: str = "general", scale: str = "letters",
                 repeats: int | None = None, threshold: float = 0.5, store: str | None = None,
                 include_reason: bool = True, strict_mode: bool = False, async_mode: bool = True,
                 verbose_mode: bool = False):
        self.model = model
        self.criteria = criteria
        self.scale = scale
        self.repeats = repeats
        self.threshold = 1.0 if strict_mode else threshold
        self.store = store
        self.include_reason = include_reason
        self.strict_mode = strict_mode
        self.async_mode = async_mode
        self.verbose_mode = verbose_mode
        self.evaluation_model = f"veriscale ({model if isinstance(model, str) else type(model).__name__})"
        self.evaluation_cost = None
        self.error: str | None = None

    @property
    def __name__(self) -> str:  # type: ignore[override,unused-ignore]
        return "veriscale"

    def _settings(self) -> dict[str, Any]:
        return dict(model=self.model, criteria=self.criteria, scale=self.scale, repeats=self.repeats,
                    store=self.store)

    def _answer(self, test_case: Any) -> tuple[str, str]:
        output = getattr(test_case, "actual_output", None)
        if output is None or (isinstance(output, str) and not output.strip()):
            raise UserError(NO_OUTPUT)
        return test_case.input, output

    def _take(self, result: ScoreResult) -> float:
        verdict = result.to_dict()
        self.evaluation_model = f"veriscale ({verdict['model']})"
        if result.failed or result.reward is None:
            why = result.errors[0] if result.errors else "no criterion could be read"
            self.score, self.success, self.reason = None, False, None
            self.error = f"the verifier's model calls failed, so the test case is unscored: {why}"
            raise ModelCallError(self.error)
        self.error = None
        reward = float(result.reward)
        self.score = (1.0 if reward >= self.threshold else 0.0) if self.strict_mode else reward
        self.score_breakdown = result.criterion_rewards()
        self.reason = reason_for(verdict) if self.include_reason else None
        self.success = self.is_successful()
        self.verbose_logs = construct_verbose_logs(
            self, steps=[*label_logs(verdict), f"Score: {self.score:.4f}\nReason: {self.reason}"])
        return self.score

    def measure(self, test_case: Any, _show_indicator: bool = True, _in_component: bool = False,
                **kwargs: Any) -> float:
        """The reward of ``test_case.actual_output`` for ``test_case.input`` (sets score, reason, success)."""
        task, answer = self._answer(test_case)
        with metric_progress_indicator(self, async_mode=False, _show_indicator=_show_indicator,
                                       _in_component=_in_component):
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                result = score(task, answer, **self._settings())
            else:  # called from inside a loop: the synchronous verdict runs on a loop of its own thread
                with concurrent.futures.ThreadPoolExecutor(1) as pool:
                    result = pool.submit(score, task, answer, **self._settings()).result()
            return self._take(result)

    async def a_measure(self, test_case: Any, _show_indicator: bool = True, _in_component: bool = False,
                        **kwargs: Any) -> float:
        """:meth:`measure`, awaited on the caller's loop (DeepEval's)."""
        task, answer = self._answer(test_case)
        with metric_progress_indicator(self, async_mode=True, _show_indicator=_show_indicator,
                                       _in_component=_in_component):
            return self._take(await ascore(task, answer, **self._settings()))

    def is_successful(self) -> bool:
        if self.error is not None or self.score is None:
            self.success = False
        else:
            self.success = self.score >= self.threshold
        return bool(self.success)
