"""The embedded model under the gateway: a cancelled call stops at its next token, and the
gateway's loop keeps serving while the model works for two callers (real SmolLM2 model)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from veriscale.engine.sync_facade import PlannedCall
from veriscale.engine.gateway import Gateway
from veriscale.engine.routing import endpoint_limits
from veriscale.models.base import Message, ScoreRequest
from veriscale.models.embedded import EmbeddedModel
from veriscale.verify.reward import Verifier

GUARD_S = 600  # a hang guard only: every wait ends on an event


@pytest.mark.embedded
def test_a_cancelled_embedded_call_stops_at_its_next_token(monkeypatch) -> None:
    model = EmbeddedModel.load()
    reached, resume, steps = threading.Event(), threading.Event(), []
    real = model._last_logits

    def held_at_first_token():
        steps.append(1)
        if len(steps) == 1:
            reached.set()
            resume.wait(GUARD_S)
        return real()

    monkeypatch.setattr(model, "_last_logits", held_at_first_token)
    request = ScoreRequest(messages=(Message("user", "Write a long story about a cat, then grade it."),),
                           prefill="Grade:", labels=("A", "B"), reasoning=True, max_reasoning_tokens=200)

    async def main() -> None:
        task = asyncio.ensure_future(Gateway(model, None, prompt_version="t").run([PlannedCall(request)]))
        assert await asyncio.to_thread(reached.wait, GUARD_S)
        task.cancel()
        resume.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert len(steps) == 1  # no token after the one it was at
    assert model._lock.acquire(blocking=False)  # the worker had let go of the model when the caller returned
    model._lock.release()


@pytest.mark.embedded
def test_the_gateway_loop_keeps_serving_while_two_callers_use_the_embedded_model(monkeypatch) -> None:
    model = EmbeddedModel.load()
    verifier, other = Verifier(model, criteria="general"), Verifier(model, criteria="general")
    verifier.check_labels(), other.check_labels()
    inside, release = threading.Event(), threading.Event()
    real = model._eval_prompt

    def held(tokens, stop=None):
        if not inside.is_set():
            inside.set()
            release.wait(GUARD_S)
        return real(tokens, stop)

    monkeypatch.setattr(model, "_eval_prompt", held)
    loop = asyncio.new_event_loop()  # the callers' one loop, served by a thread of this test
    serving = threading.Thread(target=loop.run_forever, daemon=True)
    serving.start()
    first = asyncio.run_coroutine_threadsafe(verifier.ascore("Say hi.", "hi"), loop)
    assert inside.wait(GUARD_S)
    second = asyncio.run_coroutine_threadsafe(other.ascore("Say hi.", "hello"), loop)
    slots = endpoint_limits(model, concurrency=1).slots
    deadline = time.monotonic() + GUARD_S
    while slots.waiting < 1 and time.monotonic() < deadline:  # the second caller waits for the model
        time.sleep(0.01)
    assert slots.waiting == 1

    async def trivial() -> str:
        for _ in range(10):
            await asyncio.sleep(0)
        return "served"

    assert asyncio.run_coroutine_threadsafe(trivial(), loop).result(GUARD_S) == "served"
    assert not first.done() and not second.done()  # served while the model still worked for both
    release.set()
    a, b = first.result(GUARD_S), second.result(GUARD_S)
    assert a.reward is not None and b.reward is not None
    loop.call_soon_threadsafe(loop.stop)
    serving.join(GUARD_S)
    loop.close()
