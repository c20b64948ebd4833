"""Cheaper groups: the sparse scheme's bounds and order, the scheme on every result, the
``group_scheme`` setting from keyword, environment, config file and flag, and pointwise
rewards that judge identical completions once. Simulated oracle and scripted test doubles."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.rewards.test_group_and_shaping import GradedModel
from veriscale.cli.settings import SPEC
from veriscale.errors import UserError
from veriscale.rewards import BatchRewarder, GroupRewarder, TRLReward
from veriscale.rewards.configure import build_rewarder
from veriscale.rewards.group import GROUP_SCHEMES
from veriscale.selection.core.bradley_terry import fit_bradley_terry
from tests.support.selection_sim import NoisyPreferenceOracle, kendall_tau, random_qualities
from veriscale.selection.core.sparse import comparison_budget, sparse_ranking
from veriscale.verify.reward import Verifier

TASK = "Compute 17 * 23 and show the steps."
GROUP = [f"17*23 = {391 + 10 * i} " + "+" * marks for i, marks in enumerate([2, 0, 4, 1, 3, 0, 2, 1])]


@pytest.mark.parametrize("n", range(2, 17))
def test_the_sparse_scheme_never_exceeds_3n_comparisons(n: int) -> None:
    for seed in range(2):
        oracle = NoisyPreferenceOracle(random_qualities(n, seed), noise=0.3, slot_bias=0.1, seed=seed)
        result = sparse_ranking(n, oracle, seed=seed)
        assert result.n_comparisons <= min(3 * n, n * (n - 1) // 2) == comparison_budget(n)
        assert oracle.calls == result.n_judgements == 2 * result.n_comparisons  # each in both slot orders
        assert sorted(result.ranking) == list(range(n)) and np.all(np.isfinite(result.strengths))
    if n >= 8:  # the cap binds only where round robin would spend more
        assert comparison_budget(n) == 3 * n < n * (n - 1) // 2


@pytest.mark.parametrize("n", [2, 3, 5, 8, 12])
def test_a_consistent_oracle_is_ranked_in_its_true_order(n: int) -> None:
    qualities = np.linspace(-2.0, 2.0, n)[np.random.default_rng(n).permutation(n)]
    oracle = NoisyPreferenceOracle(qualities, temperature=0.3, noise=0.0, seed=1)
    result = sparse_ranking(n, oracle, seed=4)
    assert list(result.ranking) == sorted(range(n), key=lambda i: -qualities[i])
    assert kendall_tau(result.strengths, qualities) == pytest.approx(1.0)


def test_the_scheme_is_deterministic_under_a_seed() -> None:
    qualities = random_qualities(8, 5)
    runs = [sparse_ranking(8, NoisyPreferenceOracle(qualities, noise=0.2, seed=2), seed=9) for _ in range(2)]
    assert runs[0].comparisons == runs[1].comparisons and runs[0].strengths == runs[1].strengths


def test_bradley_terry_over_a_sparse_graph_stays_finite() -> None:
    ring = [(i, (i + 1) % 8, 1.0) for i in range(8)]  # every outcome certain, each item met twice
    chain = [(i, i + 1, 1.0) for i in range(7)]        # a path: the sparsest connected graph
    for outcomes in (ring, chain, [(0, 1, 1.0)]):      # the last leaves six items never compared
        fit = fit_bradley_terry(8, outcomes)
        assert np.all(np.isfinite(fit.strengths)) and np.all(np.isfinite(fit.covariance))
    one = sparse_ranking(8, NoisyPreferenceOracle(random_qualities(8, 1), noise=0.0), max_comparisons=1)
    assert one.n_comparisons == 1 and np.all(np.isfinite(one.strengths))


def test_bad_scheme_arguments_are_one_sentence() -> None:
    judge = NoisyPreferenceOracle([0.0, 1.0])
    for kwargs, needle in [({"pivots": -1}, "pivots=-1"), ({"settled": 0.4}, "settled=0.4"),
                           ({"max_comparisons": 0}, "max_comparisons=0"), ({"repeats": 0}, "repeats=0")]:
        with pytest.raises(UserError, match=needle):
            sparse_ranking(2, judge, **kwargs)


def test_sparse_group_rewards_rank_like_round_robin_for_fewer_calls() -> None:
    results = {}
    for scheme in GROUP_SCHEMES:
        model = GradedModel()
        results[scheme] = (GroupRewarder(Verifier(model, scale="letters:5"), scheme=scheme).group(TASK, GROUP),
                           len(model.calls))
    (sparse, sparse_calls), (robin, robin_calls) = results["sparse"], results["round_robin"]
    assert sparse.scheme == "sparse" and robin.scheme == "round_robin"
    assert robin.comparisons == 28 and sparse.comparisons <= 24 and sparse.tournament.method == "sparse"
    assert sparse_calls < robin_calls and sparse.usage.model_calls == sparse_calls
    marks = [text.count("+") for text in GROUP]
    names = {c.name for c in Verifier(GradedModel(), scale="letters:5").criteria.items}
    for result in (sparse, robin):  # more marks, more reward
        order = sorted(range(8), key=lambda i: -result.rewards[i])
        assert [marks[i] for i in order] == sorted(marks, reverse=True)
        assert all(set(c) == names and None not in c.values() for c in result.criteria)


def test_each_result_and_batch_records_its_scheme_and_the_trl_log_shows_it() -> None:
    verifier = Verifier(GradedModel(), scale="letters:5")
    assert GroupRewarder(verifier).group(TASK, ["a +", "b"]).scheme == "sparse"  # the default
    assert GroupRewarder(verifier, scheme="round_robin").group(TASK, ["a +", "b"]).scheme == "round_robin"
    for scheme in GROUP_SCHEMES:  # a group of one, and one with nothing to judge, say it too
        assert {GroupRewarder(verifier, scheme=scheme).group(TASK, texts).scheme
                for texts in (["only one"], [None, " "])} == {scheme}
    batch = BatchRewarder(verifier, scheme="sparse").rewards([TASK] * 4 + ["other"], GROUP[:4] + ["x"])
    assert batch.scheme == "sparse" and batch.neutral_filled().scheme == "sparse"
    alone = GroupRewarder(verifier, scheme="sparse").group(TASK, GROUP[:4]).comparisons
    assert 4 <= batch.comparisons == alone <= 6 and batch.metrics()["comparisons"] == float(alone)
    extra, metrics = {}, {}
    reward = TRLReward(verifier, mode="group")
    reward.rewarder = BatchRewarder(verifier, scheme="sparse")
    reward(prompts=[TASK] * 3, completions=GROUP[:3], log_extra=extra.__setitem__, log_metric=metrics.__setitem__)
    assert extra["veriscale_group_scheme"] == ["sparse"] * 3 and metrics["veriscale/comparisons"] == 3.0


def test_identical_completions_are_judged_once_in_pointwise_mode() -> None:
    model = GradedModel()
    rewarder = BatchRewarder(Verifier(model, scale="letters:5"), mode="pointwise")
    prompts = ["p", "p", "q", "p", "q", "p"]
    responses = ["a +", "a +", "a +", "b", "a +", None]
    batch = rewarder.rewards(prompts, responses)
    per_score = len(model.calls) // 3
    assert per_score >= 1 and len(model.calls) == 3 * per_score  # (p, a +), (q, a +), (p, b): once each
    assert batch.rewards[0] == batch.rewards[1] and batch.criteria[0] == batch.criteria[1]
    assert batch.rewards[2] == batch.rewards[4] and batch.rewards[5] is None and batch.unverified[5]
    assert batch.group_sizes == [1] * 6 and batch.usage.model_calls == len(model.calls)
    distinct = GradedModel()
    BatchRewarder(Verifier(distinct, scale="letters:5"), mode="pointwise").rewards(["p", "q", "p"], ["a +", "a +", "b"])
    assert len(distinct.calls) == len(model.calls)


def _config(tmp_path: Path, scheme: str | None) -> Path:
    path = tmp_path / f"config-{scheme}.toml"
    path.write_text("" if scheme is None else f'[rewards]\ngroup_scheme = "{scheme}"\n', encoding="utf-8")
    return path


def test_the_setting_reaches_the_rewarder_from_keyword_environment_and_file(tmp_path, monkeypatch) -> None:
    assert SPEC["reward_group_scheme"].choices == GROUP_SCHEMES
    verifier = Verifier(GradedModel(), scale="letters:5")
    monkeypatch.delenv("VERISCALE_REWARD_GROUP_SCHEME", raising=False)
    monkeypatch.setenv("VERISCALE_CONFIG", str(_config(tmp_path, None)))
    assert build_rewarder(verifier, mode="group").grouper.scheme == SPEC["reward_group_scheme"].default
    monkeypatch.setenv("VERISCALE_CONFIG", str(_config(tmp_path, "round_robin")))
    assert build_rewarder(verifier, mode="group").grouper.scheme == "round_robin"
    monkeypatch.setenv("VERISCALE_REWARD_GROUP_SCHEME", "sparse")  # the environment beats the file
    assert build_rewarder(verifier, mode="group").grouper.scheme == "sparse"
    assert build_rewarder(verifier, group_scheme="round_robin").grouper.scheme == "round_robin"  # a keyword beats both


def test_a_bad_scheme_name_is_one_sentence_from_every_source(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("VERISCALE_REWARD_GROUP_SCHEME", raising=False)
    verifier = Verifier(GradedModel(), scale="letters:5")
    with pytest.raises(UserError, match=r"group_scheme='ring' is unknown: use one of round_robin, sparse"):
        GroupRewarder(verifier, scheme="ring")
    with pytest.raises(UserError, match=r"group_scheme='ring' is unknown"):
        build_rewarder(verifier, group_scheme="ring")
    monkeypatch.setenv("VERISCALE_CONFIG", str(_config(tmp_path, "ring")))
    with pytest.raises(UserError, match=r"config file '.*': rewards.group_scheme = 'ring' is unknown: use one of"):
        build_rewarder(verifier)
    monkeypatch.setenv("VERISCALE_REWARD_GROUP_SCHEME", "ring")
    with pytest.raises(UserError, match=r"\$VERISCALE_REWARD_GROUP_SCHEME = 'ring' is unknown: use one of"):
        build_rewarder(verifier)


CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("VERISCALE_REWARD_GROUP_SCHEME", "VERISCALE_CONFIG")}


def _serve(args: list[str], env: dict[str, str]) -> tuple[int | None, str]:
    """Start ``veriscale serve-reward`` on a free port; (its exit code, None while it serves; its first line)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "veriscale", "serve-reward", "--port", str(port),
                             "--model", "http://127.0.0.1:9/v1#unreachable", *args],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env={**CLEAN_ENV, "COLUMNS": "400", **env})
    try:
        line = proc.stderr.readline()
        return proc.poll(), line
    finally:
        proc.terminate()
        proc.communicate(timeout=120)


def test_the_flag_environment_and_file_reach_the_reward_server(tmp_path) -> None:
    config, robin = str(_config(tmp_path, "sparse")), str(_config(tmp_path, "round_robin"))
    for args, env, scheme in [([], {"VERISCALE_CONFIG": str(_config(tmp_path, None))}, "sparse"),
                              ([], {"VERISCALE_CONFIG": robin}, "round_robin"),
                              ([], {"VERISCALE_REWARD_GROUP_SCHEME": "sparse", "VERISCALE_CONFIG": robin}, "sparse"),
                              (["--group-scheme", "round_robin"], {"VERISCALE_REWARD_GROUP_SCHEME": "sparse",
                                                                   "VERISCALE_CONFIG": config}, "round_robin")]:
        code, line = _serve(args, env)
        assert code is None and f"groups ranked by {scheme}" in line, line
    proc = subprocess.run([sys.executable, "-m", "veriscale", "serve-reward", "--group-scheme", "ring"],
                          capture_output=True, text=True, timeout=120,
                          env={**CLEAN_ENV, "COLUMNS": "400", "VERISCALE_CONFIG": str(_config(tmp_path, None))})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--group-scheme = 'ring' is unknown: use one of round_robin, sparse" in proc.stderr
