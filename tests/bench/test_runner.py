"""Bench runner: sweeps, subsample, and a pool bench end to end through the real Verifier,
``select`` and the store, with a keyword-grading test double standing in for the model."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from veriscale.bench.datasets import LabelledPair, LabelledPool, load_labelled_pools, load_pairs, sample
from veriscale.bench.bench_runner import Bench, BenchConfig, expand_configs, parse_sweeps
from veriscale.data.model import Candidate, Task
from veriscale.engine.store import Store
from veriscale.errors import UserError
from veriscale.models.base import ScoreResponse


class KeywordGraderDouble:
    """Test double for a model backend: grades the response in the asked slot by a keyword.

    A response containing "tests pass" gets mass on the best label, anything else on the worst.
    """

    uri = "double:keyword"
    display_name = "keyword grader double"
    is_embedded = False

    def __init__(self) -> None:
        self.calls = 0

    def fingerprint(self) -> str:
        return "double:keyword:v1"

    def context_size(self) -> int:
        return 4096

    def count_tokens(self, text: str) -> int:
        return max(1, len(text) // 4)

    def single_token_labels(self, labels):
        return []

    def score(self, request) -> ScoreResponse:
        self.calls += 1
        user = request.messages[-1].content
        if "## First response" in user:
            first = re.search(r"## First response\n(.*?)\n\n## Second response", user, re.S).group(1)
            second = re.search(r"## Second response\n(.*?)\n\n## Criterion", user, re.S).group(1)
            shown = first if "first" in request.prefill else second
        else:
            shown = re.search(r"## Response\n(.*?)\n\n## Criterion", user, re.S).group(1)
        labels = request.labels
        good = "tests pass" in shown
        probs = {lab: 0.0 for lab in labels}
        probs[labels[0] if good else labels[-1]] = 0.8
        probs[labels[len(labels) // 2]] += 0.2
        return ScoreResponse(label_probs=probs, label_mass=0.9, prompt_tokens=self.count_tokens(user))


def labelled_pool(task_id: str, good: list[bool]) -> LabelledPool:
    task = Task(text=f"Fix the failing build of {task_id}.", id=task_id)
    cands = [Candidate(id=f"{task_id}-{i}", text=("ran make; all tests pass" if g else f"gave up after error {i}"),
                       task=task) for i, g in enumerate(good)]
    return LabelledPool(task_id, task, cands, [1.0 if g else 0.0 for g in good])


def test_parse_and_expand_sweeps():
    sweeps = parse_sweeps(["g=2,5", "c=1,3"])
    assert sweeps == {"g": [2, 5], "c": [1, 3]}
    configs = expand_configs(BenchConfig(), sweeps, discrete_vs_continuous=True)
    assert len(configs) == 8
    assert [(c.g, c.c, c.discrete) for c in configs[:3]] == [(2, 1, False), (2, 1, True), (2, 3, False)]
    assert configs[0].scale_spec() == "letters:2" and BenchConfig().scale_spec() == "letters"
    for bad in (["x=1"], ["g=0"], ["g=a"], ["g"], ["g=2", "g=5"]):
        with pytest.raises(UserError):
            parse_sweeps(bad)


def test_sample_is_seeded_and_keeps_order():
    items = list(range(50))
    assert sample(items, 5, 3) == sample(items, 5, 3)
    assert sample(items, 5, 3) == sorted(sample(items, 5, 3))
    assert sample(items, 5, 3) != sample(items, 5, 4)
    assert sample(items, None, 0) == items == sample(items, 0, 0)


def test_pool_bench_selects_the_passing_runs_and_discrete_reuses_every_call(tmp_path):
    pools = [labelled_pool("a", [False, True, False]), labelled_pool("b", [False, False, True, False])]
    model = KeywordGraderDouble()
    bench = Bench(model, Store.open(tmp_path / "s.sqlite3"), criteria="agent", method="ppt", adaptive=False)
    configs = expand_configs(BenchConfig(k=1), {}, discrete_vs_continuous=True)
    plan = bench.plan_pools(pools, configs)
    estimate = bench.estimate(plan)
    assert estimate.upper_bound and estimate.model_calls > 0
    continuous, discrete = bench.run(plan)
    m = continuous.metrics
    assert m["selected"] == 1.0 and m["oracle"] == 1.0
    assert m["pass_at_1"] == pytest.approx((1 / 3 + 1 / 4) / 2)
    assert m["comparisons"] == (3 + 2) + (4 + 3)  # N + k(N-k) per task with k=1
    assert continuous.usage.model_calls == model.calls > 0
    assert estimate.model_calls >= model.calls
    assert discrete.usage.model_calls == 0 and discrete.usage.cache_hits > 0
    assert discrete.metrics["selected"] == 1.0
    assert discrete.metrics["random_pick"] == m["random_pick"]  # same seeded baseline in every row


class CountingKeywordGraderDouble(KeywordGraderDouble):
    """``KeywordGraderDouble`` that counts how often each text is tokenised."""

    def __init__(self) -> None:
        super().__init__()
        self.tokenised: Counter[str] = Counter()

    def count_tokens(self, text: str) -> int:
        self.tokenised[text] += 1
        return super().count_tokens(text)


def test_a_bench_plan_tokenises_each_run_once_across_configurations_and_the_run(tmp_path):
    pools = [labelled_pool("a", [False, True, False])]
    pairs = [LabelledPair("p", "Fix the build.", "ran make; all tests pass", "gave up after error 7", 1)]
    model = CountingKeywordGraderDouble()
    bench = Bench(model, Store.open(tmp_path / "s.sqlite3"), criteria="agent", method="ppt", adaptive=False)
    configs = expand_configs(BenchConfig(k=1), {"g": [5, 20]}, discrete_vs_continuous=True)
    pool_plan, pair_plan = bench.plan_pools(pools, configs), bench.plan_pairs(pairs, configs)
    assert [cp.shares_calls for cp in pool_plan.configs] == [False, True, False, True]
    texts = [c.text for c in pools[0].candidates] + [pairs[0].output_2]
    bench.estimate(pool_plan), bench.estimate(pair_plan)
    rows = bench.run(pool_plan) + bench.run(pair_plan)
    assert [model.tokenised[t] for t in texts] == [1, 1, 1, 1]
    assert [row.usage.model_calls == 0 for row in rows] == [False, True, False, True] * 2


def test_pairs_and_pools_files_are_validated(tmp_path):
    bad = tmp_path / "pairs.jsonl"
    bad.write_text('{"instruction": "x", "output_1": "a", "output_2": "b", "label": 3}\n')
    with pytest.raises(UserError, match="label 3"):
        load_pairs(bad)
    missing = tmp_path / "missing.jsonl"
    missing.write_text('{"instruction": "x", "output_1": "a"}\n')
    with pytest.raises(UserError, match="lacks output_2, label"):
        load_pairs(missing)
    unlabelled = tmp_path / "a.md"
    unlabelled.write_text("an answer")
    with pytest.raises(UserError, match="no label"):
        load_labelled_pools([unlabelled])
