"""Rewards on Ray (``veriscale.rewards.ray_pool``) on a local Ray instance: the pool's rewards equal
the in-process rewarder's on the scripted test double, through the rewarder, veRL's functions and
the OpenRLHF reward server; the endpoint's concurrency holds across replicas at the desk; a killed
replica's request is answered by another, and with none left the server answers 503; an
``--address`` nobody answers at is one sentence from ``serve-reward --ray``.

Replicas load the scripted doubles through the pool's ``setup`` (tests/support/ray_doubles.py).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from tests.support.ray_doubles import register_in_worker
from tests.support.scripted_model import ScriptedScoreModel
from tests.support.served_app import served
from veriscale.rewards.batch import BatchRewarder
from veriscale.rewards.batch_rewards import RewardService
from veriscale.rewards.ray_pool import POOL_NAME, POOL_NAMESPACE, PoolRewarder, PoolUnavailable, reward_pool
from veriscale.rewards.server import create_reward_app
from veriscale.rewards.verl import make_compute_score
from veriscale.verify.reward import Verifier

ray = pytest.importorskip("ray")  # the [ray] extra
REPO = Path(__file__).resolve().parents[2]

PROMPTS = ["Task A: add 2 and 2."] * 3 + ["Task B: name a colour."] * 2
RESPONSES = ["GOOD: 4", "5", "GOOD: it is 4", "blue-ish?", "GOOD: red"]


def _local() -> BatchRewarder:
    return BatchRewarder(Verifier(ScriptedScoreModel(), criteria="general"))


@pytest.fixture(scope="module")
def local_ray():
    if ray.is_initialized():  # another module's instance: start from a clean one
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}})  # replicas import tests.support
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def pool(local_ray):
    """Two replicas of the scripted double, under the name veRL's functions look for."""
    return reward_pool(2, rewarder=_local(), name=POOL_NAME, namespace=POOL_NAMESPACE, detached=False,
                       setup=register_in_worker)


def _same(pooled, local) -> None:
    assert pooled.rewards == local.rewards
    assert pooled.criteria == local.criteria
    assert (pooled.group_sizes, pooled.unverified, pooled.comparisons) == (local.group_sizes, local.unverified,
                                                                           local.comparisons)
    assert pooled.usage.model_calls == local.usage.model_calls


def test_the_pool_rewards_exactly_as_the_rewarder_in_this_process(pool) -> None:
    local = _local().rewards(PROMPTS, RESPONSES)
    rewarder = PoolRewarder(pool)
    _same(rewarder.rewards(PROMPTS, RESPONSES), local)
    _same(asyncio.run(rewarder.arewards(PROMPTS, RESPONSES)), local)
    assert local.rewards[0] > local.rewards[1] and None not in local.rewards
    assert rewarder.grouper.scheme == _local().grouper.scheme and rewarder.mode == "group"


def test_verl_functions_find_the_named_pool_and_score_as_the_local_verifier(pool) -> None:
    from veriscale.rewards import verl_ray

    row = {"data_source": "gsm8k", "solution_str": "GOOD: 391", "ground_truth": "391",
           "extra_info": {"question": "What is 17 * 23?"}}
    before = sum(ray.get(pool.stats.remote())["answered"].values())
    assert verl_ray.compute_score(**row) == make_compute_score(_local()).compute_score(**row)
    assert asyncio.run(verl_ray.compute_score_async(**row)) == make_compute_score(_local()).compute_score(**row)
    assert sum(ray.get(pool.stats.remote())["answered"].values()) == before + 2  # both went to the pool
    assert isinstance(verl_ray.scorer().rewarder, PoolRewarder)


def test_veRLs_reward_loop_scores_through_the_pool_as_the_local_verifier(pool, tmp_path: Path) -> None:
    """veRL's own reward loop (``RewardLoopWorker`` -> ``NaiveRewardManager``), configured the way a
    trainer is (``custom_reward_function.path=pkg://veriscale.rewards.verl_ray``), on a batch decoded
    from token tensors: every rollout is scored by the pool, and as the in-process verifier scores it."""
    from tests.rewards.test_verl_adapter import data_proto, reward_loop, verl_config
    from tests.support.tiny_policy import byte_tokenizer

    tokenizer = byte_tokenizer()
    tokenizer.save_pretrained(tmp_path / "policy")
    rows = [("What is 17 * 23?", "GOOD: 391", "391"), ("What is 17 * 23?", "371", "391"),
            ("Name the capital of France.", "GOOD: Paris", "Paris")]
    before = sum(ray.get(pool.stats.remote())["answered"].values())
    worker, outputs = reward_loop(verl_config(tmp_path / "policy", "pkg://veriscale.rewards.verl_ray",
                                              "compute_score_async"), data_proto(tokenizer, rows))
    assert worker.reward_manager.is_async_reward_score
    local = make_compute_score(_local())
    expected = [local.compute_score(data_source="veriscale/test", solution_str=response, ground_truth=truth,
                                    extra_info={"split": "train", "index": i, "question": question})
                for i, (question, response, truth) in enumerate(rows)]
    assert [out["reward_score"] for out in outputs] == pytest.approx([e["score"] for e in expected])
    assert expected[0]["score"] > expected[1]["score"]  # the scores tell the rollouts apart
    assert sum(ray.get(pool.stats.remote())["answered"].values()) == before + len(rows)  # all went to the pool


def test_length_control_at_the_pool_adjusts_as_the_rewarder_in_this_process(local_ray) -> None:
    def residual() -> BatchRewarder:
        return BatchRewarder(Verifier(ScriptedScoreModel(), criteria="general"), length_control="residual")

    local, pooled = residual(), PoolRewarder(reward_pool(1, rewarder=residual(), name=None, detached=False,
                                                         setup=register_in_worker))
    for _ in range(3):  # the window fills over the batches; from the second on the rewards are adjusted
        here, there = local.rewards(PROMPTS, RESPONSES), pooled.rewards(PROMPTS, RESPONSES)
        assert (there.rewards, there.length_corr, there.length_corr_raw) == (here.rewards, here.length_corr,
                                                                              here.length_corr_raw)
    assert local.control.slope is not None  # the control did change the rewards
    ray.kill(pooled.pool)


def test_the_reward_server_on_the_pool_answers_openrlhf_as_the_local_server_does(pool) -> None:
    body = {"query": [p + " " + r for p, r in zip(PROMPTS, RESPONSES)], "prompts": PROMPTS, "labels": [""] * 5}
    answers = []
    for rewarder in (PoolRewarder(pool), _local()):
        with served(create_reward_app(RewardService(rewarder), group_size=3, group_wait_s=0.5)) as url:
            reply = httpx.post(url + "/get_reward", json=body, timeout=60)
        assert reply.status_code == 200, reply.text
        answers.append(reply.json())
    pooled, local = answers
    assert pooled["rewards"] == local["rewards"] and pooled["scores"] == pooled["rewards"]
    assert pooled["extra_logs"] == local["extra_logs"]
    assert pooled["extra_logs"]["veriscale_group_size"] == [3.0, 3.0, 3.0, 2.0, 2.0]


def test_the_endpoints_concurrency_holds_across_replicas(local_ray) -> None:
    from tests.support.ray_doubles import CrowdWitness, register_crowd_in_worker
    from veriscale.many.ray_limits import DESK_NAME

    witness = ray.remote(CrowdWitness).options(name="crowd-witness").remote()
    model = ScriptedScoreModel()
    model.uri = "crowd:1"  # the replicas' model: a call holds on until the desk holds another one back
    template = BatchRewarder(Verifier(model, criteria="general", concurrency=1))
    crowd = reward_pool(2, rewarder=template, name=None, detached=False, setup=register_crowd_in_worker)
    rewarder = PoolRewarder(crowd)

    async def both():
        return await asyncio.gather(rewarder.arewards(PROMPTS[:3], RESPONSES[:3]),
                                    rewarder.arewards(PROMPTS[3:], RESPONSES[3:]))

    first, second = asyncio.run(both())
    assert first.rewards == _local().rewards(PROMPTS[:3], RESPONSES[:3]).rewards
    assert second.rewards == _local().rewards(PROMPTS[3:], RESPONSES[3:]).rewards
    assert ray.get(crowd.stats.remote())["answered"] == {0: 1, 1: 1}  # one batch on each replica at once
    assert ray.get(witness.peak_seen.remote()) == 1  # yet never two calls on the endpoint
    assert ray.get(ray.get_actor(DESK_NAME).state.remote("crowd:1"))["peak"] == 1
    ray.kill(crowd)
    ray.kill(witness)


def test_a_killed_replica_leaves_its_request_to_another_and_none_left_is_a_503(pool) -> None:
    local = _local().rewards(PROMPTS, RESPONSES)
    rewarder = PoolRewarder(pool)
    replicas = ray.get(pool.replicas.remote())
    before = ray.get(pool.stats.remote())["answered"]
    ray.kill(replicas[0])  # the idle pool asks replica 0 first
    _same(rewarder.rewards(PROMPTS, RESPONSES), local)
    stats = ray.get(pool.stats.remote())
    assert stats["live"] == [1] and stats["lost"] == [0]
    assert stats["answered"].get(1, 0) == before.get(1, 0) + 1
    ray.kill(replicas[1])
    with pytest.raises(PoolUnavailable, match="every reward replica is gone"):
        rewarder.rewards(PROMPTS, RESPONSES)
    with served(create_reward_app(RewardService(rewarder))) as url:
        reply = httpx.post(url + "/get_reward", json={"query": ["Q: 2+2? A: 4"], "prompts": ["Q: 2+2? A:"]},
                           timeout=60)
    assert reply.status_code == 503
    error = reply.json()["error"]
    assert "every reward replica is gone" in error and "\n" not in error


def test_a_pool_whose_replicas_cannot_load_the_model_says_why_in_one_sentence(local_ray) -> None:
    from veriscale.errors import UserError

    model = ScriptedScoreModel()
    model.uri = "nosuch:model"  # no replica knows the scheme (no setup registers it)
    with pytest.raises(UserError) as refused:
        reward_pool(1, rewarder=BatchRewarder(Verifier(model, criteria="general")), name=None, detached=False)
    assert str(refused.value).startswith("the reward pool did not start: unknown model URI 'nosuch:model'")


def test_serve_reward_on_ray_refuses_an_address_nobody_answers_at() -> None:
    from veriscale.cli import app

    result = CliRunner().invoke(app, ["serve-reward", "--ray", "--address", "127.0.0.1:1"])
    assert result.exit_code == 2, result.output
    line = " ".join(result.output.split())
    assert line.startswith("error: nothing answers at --address 127.0.0.1:1") and "drop --ray" in line
    assert "Traceback" not in result.output and "executor" not in line


def test_ray_placement_without_ray_is_refused() -> None:
    from veriscale.cli import app

    result = CliRunner().invoke(app, ["serve-reward", "--replicas", "3"])
    assert result.exit_code == 2 and "add --ray" in " ".join(result.output.split())

