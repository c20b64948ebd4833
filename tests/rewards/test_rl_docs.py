"""docs/RL.md's snippets run as written: the core batch, the shaping example, the verifiers task
class and the reward server's curl request (against a real `veriscale serve-reward`)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.served_app import wait_healthy

DOC = (Path(__file__).resolve().parents[2] / "docs" / "RL.md").read_text()


def python_block(containing: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOC, flags=re.S)
    return next(b for b in blocks if containing in b)


@pytest.mark.embedded
def test_the_batch_snippet_runs_on_the_embedded_model() -> None:
    namespace: dict = {}
    exec(python_block("BatchRewarder("), namespace)
    batch = namespace["batch"]
    assert batch.rewards[2] is None and all(0.0 < r < 1.0 for r in batch.rewards[:2])
    assert batch.usage.model_calls > 0 and batch.criteria[0]


def test_the_shaping_snippet_gives_what_its_comment_says() -> None:
    code = python_block("shaped_rewards(")
    expected = json.loads(code.split("#", 1)[1].strip())
    namespace: dict = {}
    exec(code.replace("shaped_rewards([", "result = shaped_rewards(["), namespace)
    assert namespace["result"] == pytest.approx(expected)


def test_the_verifiers_task_class_builds(monkeypatch) -> None:
    from tests.rewards.test_group_and_shaping import GradedModel
    from veriscale.rewards import configure
    from veriscale.verify.reward import Verifier

    monkeypatch.setattr(configure, "reward_verifier", lambda *a, **k: Verifier(GradedModel(), scale="letters:5"))
    namespace: dict = {}
    exec(python_block("class MathTask"), namespace)
    assert namespace["MathTask"].veriscale is namespace["judge"]


@pytest.mark.embedded
def test_the_curl_request_gets_rewards_from_a_real_serve_reward() -> None:
    payload = json.loads(re.search(r"-d '(\{.*?\})'", DOC).group(1))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "veriscale", "serve-reward", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url)
        reply = httpx.post(url + "/get_reward", json=payload, timeout=300).json()
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert len(reply["rewards"]) == len(payload["query"]) and reply["scores"] == reply["rewards"]
    assert reply["extra_logs"]["veriscale_group_size"] == [2.0, 2.0]
    assert "embedded SmolLM2-135M" in err  # the server says plainly which weak judge it uses
