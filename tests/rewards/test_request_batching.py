"""Concurrent single-query requests (OpenRLHF's way of asking) merged into GRPO groups."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.rewards.test_group_and_shaping import GradedModel
from tests.support.served_app import served
from veriscale.errors import UserError
from veriscale.rewards import BatchRewarder
from veriscale.rewards.batching import RequestBatcher
from veriscale.rewards.server import create_reward_app
from veriscale.rewards.batch_rewards import RewardService
from veriscale.verify.reward import Verifier

PROMPT = "Q: what is 17 * 23? A:"
ANSWERS = [" 381", " 391 + checked", " 391 + + checked twice", " 17 * 23 = 391 +"]


def app(**batching):
    service = RewardService(BatchRewarder(Verifier(GradedModel(), scale="letters:5")))
    return create_reward_app(service, **batching)


async def ask_one_at_a_time(url: str, answers: list[str], prompt: str = PROMPT) -> list[dict]:
    async with httpx.AsyncClient(timeout=30) as client:
        replies = await asyncio.gather(*(client.post(url + "/get_reward", json={
            "query": [prompt + a], "prompts": [prompt], "labels": ["391"]}) for a in answers))
    assert all(r.status_code == 200 for r in replies), [r.text for r in replies]
    return [r.json() for r in replies]


def test_a_group_sent_as_single_queries_is_ranked_as_one_group() -> None:
    with served(app(group_size=4, group_wait_s=30)) as url:
        replies = asyncio.run(ask_one_at_a_time(url, ANSWERS))
    rewards = [r["rewards"][0] for r in replies]
    assert [r["extra_logs"]["veriscale_group_size"] for r in replies] == [[4.0]] * 4
    assert rewards[0] < rewards[1] < rewards[2] and rewards[1] == pytest.approx(rewards[3])  # by '+' marks: 0, 1, 2, 1
    assert sum(rewards) / 4 == pytest.approx(0.5)  # Bradley–Terry rewards of one group are centred


def test_a_short_group_is_rewarded_after_the_wait() -> None:
    with served(app(group_size=8, group_wait_s=0.3)) as url:
        replies = asyncio.run(ask_one_at_a_time(url, ANSWERS[:2]))
    assert [r["extra_logs"]["veriscale_group_size"] for r in replies] == [[2.0], [2.0]]
    assert replies[0]["rewards"][0] < replies[1]["rewards"][0]


def test_different_prompts_form_different_groups() -> None:
    async def both(url):
        return await asyncio.gather(ask_one_at_a_time(url, ANSWERS[:2]),
                                    ask_one_at_a_time(url, [" Paris", " Paris +"], prompt="Q: capital of France? A:"))

    with served(app(group_size=2, group_wait_s=30)) as url:
        first, second = asyncio.run(both(url))
    assert all(r["extra_logs"]["veriscale_group_size"] == [2.0] for r in first + second)


def test_without_a_group_size_a_short_window_merges_concurrent_requests() -> None:
    with served(app(window_s=0.3)) as url:
        replies = asyncio.run(ask_one_at_a_time(url, ANSWERS[:3]))
    assert [r["extra_logs"]["veriscale_group_size"] for r in replies] == [[3.0]] * 3


def test_a_failing_judge_reaches_every_waiting_request_flagged_never_zero() -> None:
    model = GradedModel()
    model.fail_when = lambda request: True
    for on_failure, expected in (("neutral", [[0.5], [0.5]]), ("null", [[None], [None]])):
        service = RewardService(BatchRewarder(Verifier(model, scale="letters:5")), on_failure=on_failure)
        with served(create_reward_app(service, group_size=2)) as url:
            replies = asyncio.run(ask_one_at_a_time(url, ANSWERS[:2]))
        assert [r["rewards"] for r in replies] == expected
        assert [r["extra_logs"]["veriscale_failed"] for r in replies] == [[1.0], [1.0]]


def test_neutral_fill_gives_an_unverified_query_its_groups_mean() -> None:
    model = GradedModel()
    model.fail_when = lambda request: "unjudgeable" in str(request.messages)
    service = RewardService(BatchRewarder(Verifier(model, scale="letters:5"), mode="pointwise"))
    queries = [PROMPT + a for a in (" 391 +", " unjudgeable", " 381")]
    batch = service.rewards(queries, [PROMPT] * 3)
    assert batch.unverified == [False, True, False]
    assert batch.rewards[1] == pytest.approx((batch.rewards[0] + batch.rewards[2]) / 2)
    assert batch.to_openrlhf()["extra_logs"]["veriscale_failed"] == [0.0, 1.0, 0.0]


def test_the_token_may_come_in_the_url_for_clients_without_headers() -> None:
    with served(create_reward_app(RewardService(BatchRewarder(Verifier(GradedModel(), scale="letters:5"))),
                                  token="s3cret")) as url:
        body = {"query": [PROMPT + " 391"], "prompts": [PROMPT]}
        assert httpx.post(url + "/get_reward?token=s3cret", json=body).status_code == 200
        assert httpx.post(url + "/get_reward?token=wrong", json=body).status_code == 401
        assert httpx.post(url + "/get_reward", json=body).status_code == 401


def test_bad_batching_settings_are_refused() -> None:
    service = RewardService(BatchRewarder(Verifier(GradedModel(), scale="letters:5")))
    with pytest.raises(UserError, match="group_size=0 is below 1"):
        RequestBatcher(service, group_size=0)
    with pytest.raises(UserError, match="group_wait_s=0 is not above 0"):
        RequestBatcher(service, group_size=2, group_wait_s=0)
