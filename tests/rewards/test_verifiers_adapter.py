"""The verifiers adapter, driven by verifiers 0.4's own env, rollout and scoring code.

Each env test builds a real ``verifiers.v1`` environment over a two-prompt in-memory taskset,
plays it the way ``vf-eval`` does (``env.serving()``, ``env.slots``, ``env.run_slot``) against a
real llama.cpp server on 127.0.0.1 (the policy), and reads the rewards verifiers recorded: our
reward is called by ``Task.score`` (per rollout) or by an env's ``finalize`` (per episode).

TEST SCAFFOLDING: a response ``@vf.intercept`` on the task (verifiers' own hook) ends the k-th
reply to a prompt with k '+' marks (the model's own '+' are spelled out), and the judge is the
``GradedModel`` test double, which grades by '+' marks; so the expected order is known while
the rest of each reply is the real model's. The in-process harness posts the prompt to the
interception endpoint verifiers hands it, as verifiers allows a harness to.

The 0.3.x Rubric functions are called with exactly the arguments 0.3.1's ``Rubric`` passes
(``score_objects`` / ``group_score_objects``): verifiers 0.4.0 no longer ships the Rubric.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import math
import subprocess
import sys
import types
from collections import defaultdict

import httpx
import pytest
import verifiers.v1 as vf
from verifiers.v1.env import RunSlot
from verifiers.v1.envs.best_of_n import BestOfNEnv
from verifiers.v1.runtimes import ProgramResult
from verifiers.v1.utils.loaders import load_environment

from tests.rewards.test_group_and_shaping import GradedModel
from tests.support.llama_server import MODEL_ID
from veriscale.errors import UserError
from veriscale.rewards.verifiers_env import VerifiersReward, trace_texts
from veriscale.verify.reward import Verifier

PROMPTS = [("Name one colour of the sky.", "blue"), ("Name one animal that can fly.", "a bird")]


class QuestionData(vf.TaskData):
    answer: str = ""


_marks: dict[str, itertools.count] = defaultdict(itertools.count)


class MarkedTask(vf.Task[QuestionData, vf.State, vf.TaskConfig]):
    """TEST SCAFFOLDING: the k-th reply to a prompt ends with exactly k '+' marks."""

    @vf.intercept
    async def marks(self, response: vf.Response) -> vf.Response:
        k = next(_marks[self.data.prompt_text]) % 4
        text = (response.message.content or "").replace("+", " plus ").strip() + " +" * k
        return response.model_copy(update={"message": response.message.model_copy(update={"content": text})})


class SilentTask(vf.Task[QuestionData, vf.State, vf.TaskConfig]):
    """TEST SCAFFOLDING: every reply is replaced by an empty one."""

    @vf.intercept
    async def silence(self, response: vf.Response) -> vf.Response:
        return response.model_copy(update={"message": response.message.model_copy(update={"content": ""})})


class ChatHarness(vf.Harness[vf.HarnessConfig]):
    """One chat call through the interception endpoint verifiers gives the harness."""

    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, **kwargs) -> ProgramResult:
        _, prompt = self.resolve_prompt(data)
        async with httpx.AsyncClient(timeout=300) as client:
            reply = await client.post(f"{endpoint}/chat/completions", headers={"Authorization": f"Bearer {secret}"},
                                      json={"model": ctx.model, "messages": [{"role": "user", "content": prompt}]})
        return ProgramResult(0 if reply.status_code == 200 else 1, reply.text, "")


def graded(fail: bool = False, mode: str = "group", **kwargs) -> VerifiersReward:
    model = GradedModel()
    if fail:
        model.fail_when = lambda request: True
    return VerifiersReward(Verifier(model, scale="letters:5"), mode=mode, **kwargs)


def taskset(task_cls: type[vf.Task]) -> type[vf.Taskset]:
    class Questions(vf.Taskset[task_cls, vf.TasksetConfig]):  # type: ignore[valid-type]
        def load(self):
            for prompt, answer in PROMPTS:
                yield task_cls(QuestionData(prompt=prompt, answer=answer), self.config.task)

    return Questions


_ids = itertools.count()


def play(url: str, task_cls: type[vf.Task], *, rollouts: int = 1, env_cls: type[vf.Env] | None = None,
         **config) -> list[vf.Episode]:
    """Every prompt ``rollouts`` times, the way verifiers' own eval runner plays an env."""
    name = f"veriscale_test_taskset_{next(_ids)}"
    module = types.ModuleType(name)
    module.Questions, module.ChatHarness = taskset(task_cls), ChatHarness
    module.__all__ = ["Questions", "ChatHarness"] + (["Env"] if env_cls else [])
    if env_cls is not None:
        module.Env = env_cls
    sys.modules[name] = module
    _marks.clear()
    try:
        env = load_environment(vf.resolve_env_config(
            {"taskset": {"id": name, **config.pop("taskset", {})}, "agent": {"runtime": {"type": "subprocess"}},
             **config}))
        ctx = vf.ModelContext(client=vf.EvalClientConfig(base_url=url, api_key_var="VERISCALE_TEST_NO_KEY"),
                              model=MODEL_ID, sampling=vf.SamplingConfig(max_tokens=12, temperature=0.8))

        async def run() -> list[vf.Episode]:
            async with env.serving():
                slots: list[RunSlot] = [slot for task in env.taskset for slot in env.slots(task, rollouts)]
                return list(await asyncio.gather(*(env.run_slot(slot, ctx) for slot in slots)))

        return asyncio.run(run())
    finally:
        del sys.modules[name]


def marks_of(trace: vf.Trace) -> int:
    return trace.assistant_messages[-1].content.count("+")


def by_prompt(episodes: list[vf.Episode]) -> dict[str, list[vf.Trace]]:
    groups: dict[str, list[vf.Trace]] = defaultdict(list)
    for episode in episodes:
        for trace in episode.traces:
            groups[trace.task.data.prompt].append(trace)
    return groups


JUDGE = graded(mode="pointwise", reference_column="answer")


class JudgedTask(MarkedTask):
    veriscale = JUDGE  # the reward, as a task attribute: verifiers' Task.score finds and awaits it


@pytest.mark.server
def test_task_reward_is_called_by_verifiers_for_every_rollout(llama_server) -> None:
    JUDGE.rewarder.verifier.model.calls.clear()
    episodes = play(llama_server, JudgedTask, rollouts=3)
    groups = by_prompt(episodes)
    assert sorted(groups) == sorted(p for p, _ in PROMPTS) and all(len(g) == 3 for g in groups.values())
    for traces in groups.values():
        traces.sort(key=marks_of)
        assert [marks_of(t) for t in traces] == [0, 1, 2]
        rewards = [t.rewards["veriscale"].score for t in traces]
        assert all(t.ok for t in traces) and all(0.0 <= r <= 1.0 for r in rewards)
        assert rewards[0] < rewards[1] < rewards[2]  # pointwise: each scored alone, by its marks
        assert all(t.reward == pytest.approx(t.rewards["veriscale"].score) for t in traces)
        assert all(any(k.startswith("veriscale_") for k in t.metrics) and t.extra_usage for t in traces)
    judged = [call.messages[-1].content for call in JUDGE.rewarder.verifier.model.calls]
    assert judged and all("Reference answer (from the dataset" in text for text in judged)
    assert 2 * sum("a bird" in text for text in judged) == len(judged)  # each trace judged with its own answer


class RankedBestOfN(BestOfNEnv):
    """verifiers' best-of-n env, its finalize ranking the attempts with veriscale first."""

    judge: VerifiersReward

    async def finalize(self, task, episode) -> None:
        await self.judge.rank_episode(episode)
        await super().finalize(task, episode)


@pytest.mark.server
def test_group_mode_ranks_the_attempts_of_an_episode_so_an_all_wrong_group_keeps_a_gradient(llama_server) -> None:
    RankedBestOfN.judge = graded(mode="group")
    episodes = play(llama_server, MarkedTask, env_cls=RankedBestOfN, n=3)
    assert len(episodes) == 2
    for episode in episodes:
        assert episode.ok, episode.errors
        traces = sorted(episode.traces, key=marks_of)
        assert [marks_of(t) for t in traces] == [0, 1, 2]  # no reply is right: the judge only sees marks
        rewards = [t.rewards["veriscale"].score for t in traces]
        assert rewards[0] < rewards[1] < rewards[2] and sum(rewards) / 3 == pytest.approx(0.5)
        assert [t.metrics["best"] for t in traces] == [0.0, 0.0, 1.0]  # best-of-n read our reward after us


@pytest.mark.server
def test_a_failed_verification_leaves_the_reward_none_never_zero(llama_server) -> None:
    failing = graded(fail=True)

    class FailingTask(MarkedTask):
        veriscale = failing

    for trace in (t for e in play(llama_server, FailingTask) for t in e.traces):
        assert trace.rewards["veriscale"] is None and not trace.ok
        assert "could not be verified" in trace.last_error.message and "scripted failure" in trace.last_error.message

    RankedBestOfN.judge = failing
    for episode in play(llama_server, MarkedTask, env_cls=RankedBestOfN, n=2):
        assert [t.rewards["veriscale"] for t in episode.traces] == [None, None]
        assert all("got no reward" in t.last_error.message for t in episode.traces)


PLUGGED = graded(reference_column="solution")  # plugged by import path below; the tasks have no 'solution'


@pytest.mark.server
def test_bad_inputs_are_named_on_the_trace(llama_server) -> None:
    silent = graded()

    class SilentJudgedTask(SilentTask):
        veriscale = silent

    for trace in (t for e in play(llama_server, SilentJudgedTask) for t in e.traces):
        assert trace.rewards["veriscale"] is None and not trace.ok
        assert "has no completion to judge" in trace.last_error.message

    plug = {"task": {"rewards": {"veriscale": {"fn": f"{__name__}:PLUGGED"}}}}
    for trace in (t for e in play(llama_server, MarkedTask, taskset=plug) for t in e.traces):
        assert trace.rewards["veriscale"] is None and not trace.ok
        assert ("the reward needs task field 'solution', but QuestionData has no such field (its own fields: answer)"
                in trace.last_error.message)


@pytest.mark.embedded
@pytest.mark.server
def test_embedded_judge_rewards_each_trace_in_order(llama_server, embedded_model) -> None:
    verifier = Verifier(embedded_model, scale="letters:5")

    class RealTask(vf.Task[QuestionData, vf.State, vf.TaskConfig]):
        veriscale = VerifiersReward(verifier, mode="pointwise")

    traces = [t for e in play(llama_server, RealTask, rollouts=2) for t in e.traces]
    assert len(traces) == 4
    for trace in traces:
        reward = trace.rewards["veriscale"].score
        assert isinstance(reward, float) and 0.0 < reward < 1.0
        own = verifier.score(trace.task.data.prompt, trace.assistant_messages[-1].content).reward
        assert reward == pytest.approx(own)  # the reward of this trace's own completion


# --- the 0.3.x Rubric shape -------------------------------------------------------------------

def rubric_call(function, states: list[dict]) -> object:
    """``function`` called as 0.3.1's Rubric calls it: named arguments, filtered by its signature."""
    if any(name in inspect.signature(function).parameters for name in ("prompts", "completions", "states")):
        objects = {"prompts": [s["prompt"] for s in states], "completions": [s["completion"] for s in states],
                   "answers": [s.get("answer", "") for s in states], "states": states,
                   "tasks": [None] * len(states), "infos": [s.get("info", {}) for s in states], "parser": None}
    else:
        (state,) = states
        objects = {**state.get("input", {}), "prompt": state["prompt"], "completion": state["completion"],
                   "answer": state.get("answer", ""), "state": state, "info": state.get("info", {}),
                   "parser": None, "task": None}
    return asyncio.run(function(**objects))


def rollout(completion, prompt="Q: what is 17 * 23?", answer="391", **input_columns) -> dict:
    return {"prompt": [{"role": "user", "content": prompt}], "answer": answer, "info": {"level": 1},
            "input": {"prompt": prompt, "answer": answer, **input_columns},
            "completion": None if completion is None else [{"role": "assistant", "content": completion}]}


def test_rubric_group_function_ranks_a_group_and_gives_nan_not_zero_without_a_reward() -> None:
    function = graded(mode="group", reference_column="answer").rubric_function()
    assert function.__name__ == "veriscale" and "completions" in inspect.signature(function).parameters
    rewards = rubric_call(function, [rollout("381"), rollout("371 +"), rollout(None), rollout("401 + +"),
                                     rollout("   ")])
    assert rewards[0] < rewards[1] < rewards[3] and rewards[0] + rewards[1] + rewards[3] == pytest.approx(1.5)
    assert math.isnan(rewards[2]) and math.isnan(rewards[4])
    failing = graded(fail=True).rubric_function()
    assert all(math.isnan(r) for r in rubric_call(failing, [rollout("a"), rollout("b +")]))
    with pytest.raises(UserError, match="2 prompts but 1 completions: give one of each per rollout"):
        asyncio.run(function(prompts=["a", "b"], completions=["x"], answers=["", ""], states=[{}, {}]))


def test_rubric_rollout_function_scores_alone_and_names_a_missing_column(caplog) -> None:
    function = graded(mode="pointwise", reference_column="solution").rubric_function()
    assert list(inspect.signature(function).parameters)[:4] == ["prompt", "completion", "answer", "state"]
    low, high = (rubric_call(function, [rollout(text, solution="391")]) for text in ("381", "391 + +"))
    assert 0.0 <= low < high <= 1.0
    with caplog.at_level(logging.ERROR, logger="veriscale.rewards.verifiers_env"):
        missing = rubric_call(function, [rollout("391 + +")])
    assert math.isnan(missing)
    assert "the reward needs dataset column 'solution'" in caplog.text and "gets a reward (NaN)" in caplog.text


def test_trace_texts_reads_the_prompt_and_everything_the_model_added() -> None:
    trace = vf.Trace(task=vf.TraceTask(type="T", data=QuestionData(prompt="Sort x.txt", answer="sort x.txt",
                                                                   system_prompt="Use the shell.")),
                     agent=vf.AgentInfo(config=vf.AgentConfig()))
    for message, sampled, parent in ((vf.SystemMessage(content="Use the shell."), False, None),
                                     (vf.UserMessage(content="Sort x.txt"), False, 0),
                                     (vf.AssistantMessage(content="", tool_calls=[vf.ToolCall(
                                         id="1", name="bash", arguments='{"cmd": "sort x.txt"}')]), True, 1),
                                     (vf.ToolMessage(tool_call_id="1", content="a\nb"), False, 2),
                                     (vf.AssistantMessage(content="Done."), True, 3)):
        trace.nodes.append(vf.MessageNode(message=message, sampled=sampled, parent=parent))
    task, completion = trace_texts(trace.task.data, trace, "answer")
    assert task.startswith("system: Use the shell.\n\nuser: Sort x.txt") and "Reference answer" in task
    assert completion == 'tool call: bash({"cmd": "sort x.txt"})\na\nb\nDone.'
    empty = vf.Trace(task=trace.task, agent=trace.agent)
    assert trace_texts(empty.task.data, empty)[1] is None


def test_importing_veriscale_rewards_does_not_need_verifiers() -> None:
    code = "import sys, veriscale.rewards; assert not any(m.startswith('verifiers') for m in sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
