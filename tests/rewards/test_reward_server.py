"""``POST /get_reward`` on a real uvicorn server, asked with a real HTTP client (httpx)."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from tests.rewards.test_group_and_shaping import GradedModel
from tests.support.served_app import served
from veriscale.rewards import BatchRewarder
from veriscale.rewards.server import create_reward_app
from veriscale.rewards.batch_rewards import RewardService
from veriscale.verify.reward import Verifier

PROMPT = "Q: what is 17 * 23? A:"


@pytest.fixture(scope="module")
def server():
    verifier = Verifier(GradedModel(), scale="letters:5")
    with served(create_reward_app(RewardService(BatchRewarder(verifier)), token="s3cret", max_body_bytes=4096)) as url:
        yield url


AUTH = {"Authorization": "Bearer s3cret"}


def test_rewards_come_back_in_order_with_groups_ranked(server) -> None:
    queries = [PROMPT + " 381", PROMPT + " 391 + +", "Q: 2+2? A: 4 +", PROMPT + " 371 +"]
    prompts = [PROMPT, PROMPT, "Q: 2+2? A:", PROMPT]
    reply = httpx.post(server + "/get_reward", json={"query": queries, "prompts": prompts, "labels": [""] * 4},
                       headers=AUTH, timeout=60)
    assert reply.status_code == 200, reply.text
    body = reply.json()
    rewards = body["rewards"]
    assert len(rewards) == 4 and body["scores"] == rewards
    assert rewards[0] < rewards[3] < rewards[1]  # one group of three, ranked against each other
    assert body["extra_logs"]["veriscale_group_size"] == [3.0, 3.0, 1.0, 3.0]
    assert body["extra_logs"]["veriscale_failed"] == [0.0] * 4


@pytest.mark.parametrize("payload, status, needle", [
    ({"prompts": ["p"]}, 400, "no 'query'"),
    ({"query": "p x", "prompts": ["p"]}, 400, "'query' must be a list"),
    ({"query": ["p x"], "prompts": ["p", "q"]}, 400, "has 1 items but 'prompts' has 2"),
    ({"query": [None], "prompts": ["p"]}, 400, "'query[0]' is NoneType"),
    ({"query": ["p x"]}, 400, "no 'prompts'"),
    ({"query": ["x" * 5000], "prompts": ["p"]}, 413, "over 4096 bytes"),
])
def test_bad_requests_get_one_sentence(server, payload, status, needle) -> None:
    reply = httpx.post(server + "/get_reward", json=payload, headers=AUTH, timeout=30)
    assert reply.status_code == status and needle in reply.json()["error"]


def test_the_token_is_required(server) -> None:
    reply = httpx.post(server + "/get_reward", json={"query": [], "prompts": []}, timeout=30)
    assert reply.status_code == 401 and "token" in reply.json()["error"]
    reply = httpx.post(server + "/get_reward", content=b"{not json", headers=AUTH, timeout=30)
    assert reply.status_code == 400 and "not JSON" in reply.json()["error"]


def test_serve_reward_refuses_an_open_address_without_a_token() -> None:
    proc = subprocess.run([sys.executable, "-m", "veriscale", "serve-reward", "--host", "0.0.0.0"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--token" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("args, needle", [
    (["--on-failure", "zero"], "--on-failure zero is unknown: use one of neutral, null"),
    (["--mode", "best"], "--mode best is unknown"),
    (["--group-size", "0"], "--group-size must be 1 or more"),
])
def test_serve_reward_refuses_bad_settings_before_loading_a_model(args, needle) -> None:
    proc = subprocess.run([sys.executable, "-m", "veriscale", "serve-reward", *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and needle in proc.stderr
    assert "Traceback" not in proc.stderr and "embedded" not in proc.stderr  # refused before the model loads
