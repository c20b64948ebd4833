"""``veriscale serve-reward``'s app on a real uvicorn server, asked by OpenRLHF's own reward client.

OpenRLHF 0.11.2 (installed --no-deps) asks ``--remote_rm_url`` from
``openrlhf.utils.agent.SingleTurnAgentExecutor``: ``execute`` (one rollout: it decodes prompt +
response tokens into the query and posts ``[query], [prompt], [label]``) and
``_fetch_rewards_via_http`` (the aiohttp POST). Importing that module needs torch, transformers,
aiohttp, sympy and pylatexenc, all real installs; nothing is stubbed. vLLM's engine, which
``execute`` asks for the rollout's tokens, is a scripted test double here. The judge is the
graded test double (``GradedModel``: more '+' marks, a better label).

OpenRLHF sends no Authorization header, so most of these servers run without a token on
127.0.0.1; one test gives the token in the URL, the way an OpenRLHF job off loopback must.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import Counter
from types import SimpleNamespace

import httpx
import pytest

from tests.rewards.test_group_and_shaping import GradedModel
from tests.support.served_app import served
from tests.support.tiny_policy import byte_tokenizer
from veriscale.errors import ModelCallError
from veriscale.rewards import BatchRewarder
from veriscale.rewards.server import create_reward_app
from veriscale.rewards.batch_rewards import RewardService
from veriscale.verify.criteria import load_criteria
from veriscale.verify.reward import Verifier

PROMPT = "user: What is 17 * 23?\nassistant:"
OTHER = "user: Name the capital of France.\nassistant:"
CRITERIA = ["Correctness", "Instruction following", "Completeness"]
EDGE_FLAGS = ("partial_group", "split_group", "late", "retry", "reward_length_corr")


@contextlib.contextmanager
def reward_server(verifier: Verifier, **app_options):
    """The reward app on uvicorn at 127.0.0.1 (no token: OpenRLHF sends none); yields the --remote_rm_url."""
    with served(create_reward_app(RewardService(BatchRewarder(verifier)), **app_options)) as base:
        yield base + "/get_reward"


class ScriptedEngine:
    """TEST DOUBLE for OpenRLHF's vLLM engine: 'generates' one scripted response (its tokens + eos)."""

    def __init__(self, tokenizer, response: str) -> None:
        self.tokenizer, self.response = tokenizer, response

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        ids = self.tokenizer(self.response, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
        out = SimpleNamespace(token_ids=ids, text=self.response, finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[out])


def rollouts(url: str, tokenizer, asks: list[tuple[str, str, str]]) -> list[dict]:
    """(prompt, label, response) rollouts run at once, as OpenRLHF's ``generate_responses``
    (vllm_engine.py) runs a prompt's samples: one ``execute`` each, on one event loop."""
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    executor = SingleTurnAgentExecutor(url)
    params = SimpleNamespace(max_tokens=64, logprobs=None)

    async def run():
        return await asyncio.gather(*[
            executor.execute(prompt=prompt, label=label, sampling_params=params, max_length=512,
                             hf_tokenizer=tokenizer, llm_engine=ScriptedEngine(tokenizer, response))
            for prompt, label, response in asks])

    return asyncio.run(run())


@pytest.fixture(scope="module")
def tokenizer():
    return byte_tokenizer()


def test_openrlhfs_http_client_gets_rewards_in_order_ranked_within_groups() -> None:
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    queries = [PROMPT + " 381", OTHER + " Paris +", PROMPT + " 391 + +", PROMPT + " 371 +", OTHER + " Lyon"]
    prompts = [PROMPT, OTHER, PROMPT, PROMPT, OTHER]
    with reward_server(Verifier(GradedModel(), scale="letters:5")) as url:
        executor = SingleTurnAgentExecutor(url)
        labels = ["391", "Paris", "391", "391", "Paris"]
        replies = asyncio.run(executor._fetch_rewards_via_http(queries, prompts, labels))
    assert len(replies) == 1  # one server: one request with the whole batch
    reply = replies[0]
    rewards = reply["rewards"]
    assert len(rewards) == 5 and reply["scores"] == rewards
    assert rewards[0] < rewards[3] < rewards[2] and rewards[4] < rewards[1]  # ranked within each prompt's group
    assert (rewards[0] + rewards[2] + rewards[3]) / 3 == pytest.approx(0.5)
    logs = reply["extra_logs"]
    assert logs["veriscale_group_size"] == [3.0, 2.0, 3.0, 3.0, 2.0]
    assert logs["veriscale_failed"] == [0.0] * 5
    for name in CRITERIA:  # OpenRLHF logs each extra_logs key as a per-sample metric
        assert len(logs[f"veriscale_{name}"]) == 5 and all(0.0 <= v <= 1.0 for v in logs[f"veriscale_{name}"])


def test_each_rollout_asks_alone_and_is_ranked_within_its_group(tokenizer) -> None:
    """``execute`` posts one query per rollout; the server merges a prompt's rollouts into one group."""
    responses = [" 381", " 391 + + +", " 391 +"]
    model = GradedModel()
    with reward_server(Verifier(model, scale="letters:5"), group_size=3) as url:
        outputs = rollouts(url, tokenizer, [(PROMPT, "391", r) for r in responses])
    rewards = []
    for out in outputs:
        # OpenRLHF keeps the reply's lists as the rollout's reward, score and per-sample logs
        assert isinstance(out["reward"], list) and len(out["reward"]) == 1 and out["scores"] == out["reward"]
        assert set(out["extra_logs"]) == {"veriscale_group_size", "veriscale_failed", "veriscale_pointwise",
                                          *(f"veriscale_{f}" for f in EDGE_FLAGS),
                                          *(f"veriscale_{c}" for c in CRITERIA)}
        assert all(out["extra_logs"][f"veriscale_{f}"] == [0.0] for f in ("pointwise", *EDGE_FLAGS[:4]))
        assert all(isinstance(v, list) and len(v) == 1 and isinstance(v[0], float)
                   for v in out["extra_logs"].values())
        assert out["extra_logs"]["veriscale_group_size"] == [3.0]
        rewards.append(out["reward"][0])
    assert rewards[0] < rewards[2] < rewards[1]
    assert sum(rewards) / 3 == pytest.approx(0.5)  # one group's Bradley–Terry rewards
    responses_judged = [call.messages[-1].content.split("## First response", 1)[-1] for call in model.calls]
    # the server cut OpenRLHF's prompt off its decoded query, and read the label as the reference
    assert responses_judged and all("17 * 23" not in text for text in responses_judged)
    assert all("391" in call.messages[-1].content.split("## First response", 1)[0] for call in model.calls)


def test_a_failed_verification_reaches_openrlhf_as_a_number_it_can_train_on(tokenizer) -> None:
    """A null reward stops OpenRLHF (it builds a tensor of it): the default answer is the group's
    neutral value, flagged. The token travels in the URL, as it must for OpenRLHF's client."""
    import torch

    model = GradedModel()
    model.fail_when = lambda request: True
    with reward_server(Verifier(model, scale="letters:5"), token="s3cret", group_size=2) as url:
        outputs = rollouts(url + "?token=s3cret", tokenizer, [(PROMPT, "391", " 381"), (PROMPT, "391", " 391")])
        refused = rollouts(url + "?token=wrong", tokenizer, [(PROMPT, "391", " 381")])
    for out in outputs:
        assert out["reward"] == [0.5] and out["extra_logs"]["veriscale_failed"] == [1.0]
        torch.tensor([out["reward"]])  # what OpenRLHF's samples_generator does with it
        for value in out["extra_logs"].values():
            torch.tensor([value])
    assert refused[0].get("reward") is None  # OpenRLHF logs the 401 and carries no reward


class MeetingModel(GradedModel):
    """TEST DOUBLE: a call waits until calls for every one of ``names`` are in flight at the same time.

    If the server handled one request after the other, the first call would wait alone and
    fail (after a liveness bound, not a timing assertion): its reward would be None.
    """

    patience_s = 60.0

    def __init__(self, names: list[str]) -> None:
        super().__init__()
        self.names = names
        self.cond = threading.Condition()
        self.in_flight: Counter[str] = Counter()
        self.most_together = 0
        self.met = False

    def score(self, request):
        name = next(n for n in self.names if n in self._slot_text(request))
        with self.cond:
            self.in_flight[name] += 1
            self.most_together = max(self.most_together, sum(1 for n in self.names if self.in_flight[n]))
            if self.most_together == len(self.names):
                self.met = True
            self.cond.notify_all()
            met = self.cond.wait_for(lambda: self.met, timeout=self.patience_s)
            self.in_flight[name] -= 1
        if not met:
            raise ModelCallError("no other request came while this one waited: requests were served one at a time")
        return super().score(request)


def test_concurrent_requests_are_judged_at_the_same_time(tokenizer) -> None:
    """Two prompts' groups, asked at once by four rollouts, meet in the gateway together."""
    model = MeetingModel(["alpha", "beta"])
    verifier = Verifier(model, scale="letters:5", criteria=load_criteria("general").only(["Correctness"]))
    asks = [(PROMPT, "391", " alpha 391 +"), (OTHER, "Paris", " beta Paris +"), (PROMPT, "391", " alpha 381"),
            (OTHER, "Paris", " beta Lyon")]
    with reward_server(verifier, group_size=2) as url:
        outputs = rollouts(url, tokenizer, asks)
    assert model.most_together == 2  # both groups' model calls were in flight at once
    assert [out["extra_logs"]["veriscale_failed"] for out in outputs] == [[0.0]] * 4
    assert [out["extra_logs"]["veriscale_group_size"] for out in outputs] == [[2.0]] * 4
    assert outputs[0]["reward"][0] > outputs[2]["reward"][0] and outputs[1]["reward"][0] > outputs[3]["reward"][0]


@pytest.mark.parametrize("content, needle", [
    (b'{"query": ["p x"], "prompts": "p"}', "'prompts' must be a list of strings, not str"),
    (b'[{"query": ["p x"], "prompts": ["p"]}]', "no 'query'"),
    (b'{"query": ["p x"], "prompts": ["p"], "labels": "x"}', "'labels' must be a list with one label per query, not str"),
    (b'{"query": ["p x"], "prompts": ["p"], "labels": ["x", "y"]}', "'labels' has 2 items but 'query' has 1"),
])
def test_bad_requests_not_covered_by_the_server_tests(content, needle) -> None:
    model = GradedModel()
    with reward_server(Verifier(model, scale="letters:5"), max_body_bytes=4096) as url:
        reply = httpx.post(url, content=content, headers={"content-type": "application/json"}, timeout=30)
    assert reply.status_code == 400 and needle in reply.json()["error"]
    assert reply.json()["error"].count(". ") == 0  # one sentence
    assert not model.calls
