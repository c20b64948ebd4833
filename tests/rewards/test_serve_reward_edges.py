"""``serve-reward`` at OpenRLHF's edges, asked by OpenRLHF's own reward client (installed --no-deps,
see test_openrlhf_client.py): labels of any JSON value, answers within ``answer_within_s``, the
client's retries, groups split across requests, and SIGTERM on the real process.

The judges are test doubles (graded: more '+' marks, a better label; a held judge that waits on an
event the test sets), except in the process test, which runs the real embedded model.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import httpx
import pytest

from tests.rewards.test_group_and_shaping import GradedModel
from tests.rewards.test_openrlhf_client import PROMPT, ScriptedEngine, rollouts
from tests.support.served_app import served
from tests.support.serve_process import free_port, wait_up
from tests.support.tiny_policy import byte_tokenizer
from veriscale.rewards import BatchRewarder
from veriscale.rewards.server import create_reward_app
from veriscale.rewards.batch_rewards import RewardService
from veriscale.verify.criteria import load_criteria
from veriscale.verify.reward import Verifier

ONE = load_criteria("general").only(["Correctness"])
GUARD_S = 120  # hang guards: far above what each wait needs


class HeldModel(GradedModel):
    """TEST DOUBLE: every judgement waits until the test sets ``release`` (a liveness bound, not a timing)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def score(self, request):
        assert self.release.wait(GUARD_S), "the test never released the judge"
        return super().score(request)


@pytest.fixture(scope="module")
def tokenizer():
    return byte_tokenizer()


def app_for(model, **options):
    return create_reward_app(RewardService(BatchRewarder(Verifier(model, scale="letters:5", criteria=ONE))), **options)


def test_labels_of_any_json_value_are_accepted_and_group_by_canonical_json(tokenizer) -> None:
    """Before: ``"labels": [3]`` got 400 ('labels[0]' is int, not a string)."""
    model = GradedModel()
    with served(app_for(model, group_size=2)) as base:
        url = base + "/get_reward"
        asks = [(PROMPT, {"b": 1, "a": [3]}, " 391 + +"), (PROMPT, {"a": [3], "b": 1}, " 381"),
                (PROMPT, [3], " 391 +"), (PROMPT, [3], " 371"), (PROMPT, 391, " 391 +"), (PROMPT, 391, " 39")]
        outputs = rollouts(url, tokenizer, asks)
    assert all(out["reward"] is not None for out in outputs)
    assert [out["extra_logs"]["veriscale_group_size"] for out in outputs] == [[2.0]] * 6  # three groups of two
    assert [out["extra_logs"]["veriscale_partial_group"] for out in outputs] == [[0.0]] * 6
    assert outputs[0]["reward"][0] > outputs[1]["reward"][0] and outputs[2]["reward"][0] > outputs[3]["reward"][0]
    shown = [call.messages[-1].content for call in model.calls]
    assert any('{"a":[3],"b":1}' in text for text in shown) and any("dataset; judge the response against it):\n[3]" in text for text in shown)


def test_answer_within_flushes_a_partial_group_and_answers_a_late_one_neutral(tokenizer) -> None:
    model = HeldModel()
    with served(app_for(model, group_size=4, group_wait_s=600, answer_within_s=2.0)) as base:
        outputs = rollouts(base + "/get_reward", tokenizer, [(PROMPT, "391", " 391 +"), (PROMPT, "391", " 381")])
        model.release.set()
        # released: the same two queries, asked again, form a new group and are judged in time
        again = rollouts(base + "/get_reward", tokenizer, [(PROMPT, "391", " 391 +"), (PROMPT, "391", " 381")])
    for out in outputs:  # the judge was held past answer_within_s: answered in time, neutral, flagged
        logs = out["extra_logs"]
        assert out["reward"] == [0.5] and logs["veriscale_late"] == [1.0] and logs["veriscale_failed"] == [1.0]
    for out in again:  # a group of two of four after half of answer_within_s: partial, ranked
        logs = out["extra_logs"]
        assert logs["veriscale_late"] == [0.0] and logs["veriscale_partial_group"] == [1.0]
        assert logs["veriscale_group_size"] == [2.0] and logs["veriscale_pointwise"] == [0.0]
    assert again[0]["reward"][0] > again[1]["reward"][0]


def test_a_retried_request_gets_the_first_result_and_never_joins_its_group_twice(tokenizer, monkeypatch) -> None:
    """OpenRLHF's client gives up after its (fixed 180 s, here 2 s) timeout and posts the same query again."""
    import aiohttp
    import openrlhf.utils.agent as agent

    real = aiohttp.ClientTimeout
    monkeypatch.setattr(agent.aiohttp, "ClientTimeout", lambda total: real(total=2.0))
    model = GradedModel()
    app = app_for(model, group_size=2, group_wait_s=600)
    batcher = app.state.batcher
    with served(app) as base:
        url = base + "/get_reward"
        from openrlhf.utils.agent import SingleTurnAgentExecutor

        params = SimpleNamespace(max_tokens=64, logprobs=None)

        async def run():
            executor = SingleTurnAgentExecutor(url)
            first = asyncio.create_task(executor.execute(
                prompt=PROMPT, label="391", sampling_params=params, max_length=512, hf_tokenizer=tokenizer,
                llm_engine=ScriptedEngine(tokenizer, " 391 + +")))
            for _ in range(GUARD_S * 20):  # until the client has given up once and retried
                if batcher.retried:
                    break
                await asyncio.sleep(0.05)
            second = await executor.execute(prompt=PROMPT, label="391", sampling_params=params, max_length=512,
                                            hf_tokenizer=tokenizer, llm_engine=ScriptedEngine(tokenizer, " 381"))
            return await first, second

        first, second = asyncio.run(run())
    assert batcher.retried >= 1
    assert first["extra_logs"]["veriscale_retry"] == [1.0] and second["extra_logs"]["veriscale_retry"] == [0.0]
    assert first["extra_logs"]["veriscale_group_size"] == second["extra_logs"]["veriscale_group_size"] == [2.0]
    assert first["reward"][0] > second["reward"][0]
    slots = [GradedModel._slot_text(model, call, "first response") + GradedModel._slot_text(model, call, "second")
             for call in model.calls]
    assert all("381" in text for text in slots)  # every comparison was the retried query against the other one


def test_a_group_split_across_requests_is_detected_and_reported(tokenizer, caplog) -> None:
    model = GradedModel()
    with served(app_for(model, group_size=3, group_wait_s=1.0)) as base:
        url = base + "/get_reward"
        early = rollouts(url, tokenizer, [(PROMPT, "391", " 391 +"), (PROMPT, "391", " 381")])
        with caplog.at_level(logging.WARNING, logger="veriscale.rewards"):
            late = rollouts(url, tokenizer, [(PROMPT, "391", " 391 + +")])
    assert [out["extra_logs"]["veriscale_split_group"] for out in early] == [[0.0], [0.0]]
    assert [out["extra_logs"]["veriscale_partial_group"] for out in early] == [[1.0], [1.0]]
    logs = late[0]["extra_logs"]
    assert logs["veriscale_split_group"] == [1.0] and logs["veriscale_pointwise"] == [1.0]  # a slice of one
    assert any("ranked per slice" in record.getMessage() for record in caplog.records)


@pytest.mark.embedded
def test_sigterm_answers_the_requests_waiting_for_their_group_then_exits(tmp_path) -> None:
    """The real ``veriscale serve-reward`` process: before, SIGTERM waited for --group-wait (here 600 s)."""
    port = free_port()
    log = tmp_path / "serve-reward.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "veriscale", "serve-reward", "--port", str(port),
                                 "--model", "embedded", "--store", str(tmp_path / "store.db"), "--scale", "letters:5",
                                 "--group-size", "4", "--group-wait", "600"],
                                stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ))
    base = f"http://127.0.0.1:{port}"
    try:
        wait_up(base, proc, log, GUARD_S, health="/health")
        replies: list = []
        body = {"query": [PROMPT + " 391"], "prompts": [PROMPT], "labels": ["391"]}
        asker = threading.Thread(target=lambda: replies.append(httpx.post(base + "/get_reward", json=body,
                                                                         timeout=GUARD_S)))
        asker.start()
        deadline = time.monotonic() + GUARD_S
        while time.monotonic() < deadline and httpx.get(base + "/health").json()["filling"] < 1:
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        asker.join(GUARD_S)
        proc.wait(GUARD_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert replies and replies[0].status_code == 200, log.read_text()
    answer = replies[0].json()
    assert answer["extra_logs"]["veriscale_partial_group"] == [1.0] and answer["extra_logs"]["veriscale_failed"] == [0.0]
    assert 0.0 < answer["rewards"][0] < 1.0
    assert proc.returncode in (0, 130, -signal.SIGTERM), log.read_text()  # 130: veriscale's 'interrupted'
    assert "Traceback" not in log.read_text()
    json.dumps(answer)
