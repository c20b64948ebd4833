"""VeriscaleMetric inside a real DeepEval run (assert_test, evaluate), with the embedded model.

Collected only by the interpreter of .tools/deepeval-venv (tests/integrations/conftest.py keeps the
main suite out); tests/integrations/test_deepeval_metric.py runs this file there.
"""

from __future__ import annotations

import asyncio
import warnings

import pytest
from deepeval import assert_test, evaluate
from deepeval.evaluate.configs import AsyncConfig, CacheConfig, DisplayConfig
from deepeval.test_case import LLMTestCase

from veriscale.errors import UserError
from veriscale.integrations.deepeval_metric import NO_OUTPUT, VeriscaleMetric
from veriscale.models.weak_judge import WeakJudgeWarning

TASK = "What is 2+2?"
GOOD, BAD = LLMTestCase(input=TASK, actual_output="4"), LLMTestCase(input=TASK, actual_output="5")

pytestmark = pytest.mark.filterwarnings("ignore", category=WeakJudgeWarning)


def test_assert_test_passes_a_reward_over_the_threshold_and_fails_one_under_it():
    assert_test(GOOD, [VeriscaleMetric(threshold=0.5)])
    with pytest.raises(AssertionError, match="veriscale"):
        assert_test(GOOD, [VeriscaleMetric(threshold=0.99)])


def test_evaluate_scores_the_right_answer_above_the_wrong_one_with_reason_and_label_logs():
    metric = VeriscaleMetric(threshold=0.5)
    result = evaluate(test_cases=[GOOD, BAD], metrics=[metric],
                      display_config=DisplayConfig(print_results=False, show_indicator=False),
                      cache_config=CacheConfig(write_cache=False, use_cache=False),
                      async_config=AsyncConfig(run_async=True))
    by_output = {r.actual_output: r.metrics_data[0] for r in result.test_results}
    good, bad = by_output["4"], by_output["5"]
    assert good.name == bad.name == "veriscale"
    assert 0.0 <= bad.score < good.score <= 1.0
    for data in (good, bad):
        assert data.success is (data.score >= 0.5)
        assert data.threshold == 0.5 and data.error is None
        assert data.reason.startswith("veriscale reward ") and "Correctness" in data.reason
        assert "\n" not in data.reason  # one paragraph
        assert "label distribution {A " in data.verbose_logs and "Completeness:" in data.verbose_logs
        assert data.evaluation_model == "veriscale (embedded)"


def test_measure_and_a_measure_agree_and_fill_the_metric():
    sync_metric, async_metric = VeriscaleMetric(threshold=0.5), VeriscaleMetric(threshold=0.5)
    assert sync_metric.measure(GOOD, _show_indicator=False) == pytest.approx(asyncio.run(async_metric.a_measure(GOOD)))
    for m in (sync_metric, async_metric):
        assert m.is_successful() is m.success is True
        assert set(m.score_breakdown) == {"Correctness", "Instruction following", "Completeness"}
        assert m.verbose_logs.count("label distribution") == 3


def test_measure_inside_a_running_loop_and_assert_test_without_async():
    async def from_a_loop():
        return VeriscaleMetric().measure(GOOD, _show_indicator=False)  # the sync verdict runs on its own thread

    assert asyncio.run(from_a_loop()) == pytest.approx(VeriscaleMetric().measure(GOOD, _show_indicator=False))
    assert_test(GOOD, [VeriscaleMetric(threshold=0.5, async_mode=False)], run_async=False)


def test_strict_mode_scores_one_or_zero():
    metric = VeriscaleMetric(strict_mode=True)
    assert metric.measure(GOOD, _show_indicator=False) == 0.0 and metric.threshold == 1.0 and not metric.success


@pytest.mark.parametrize("output", [None, "", "   "])
def test_a_test_case_without_actual_output_gets_one_sentence(output):
    case = LLMTestCase(input=TASK, actual_output=output)
    with pytest.raises(UserError) as sync_err:
        VeriscaleMetric().measure(case)
    with pytest.raises(UserError) as async_err:
        asyncio.run(VeriscaleMetric().a_measure(case))
    with warnings.catch_warnings(), pytest.raises(UserError) as in_deepeval:
        assert_test(case, [VeriscaleMetric()])
    assert str(sync_err.value) == str(async_err.value) == str(in_deepeval.value) == NO_OUTPUT
    assert "\n" not in NO_OUTPUT and ". " not in NO_OUTPUT  # one sentence
