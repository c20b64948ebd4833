"""Rewards for ``verifiers`` environments: a ``@vf.reward`` for 0.4 tasks, a Rubric function for 0.3.x.

verifiers 0.4 (``import verifiers.v1 as vf``) scores each rollout with its task's ``@vf.reward``
methods; a :class:`VerifiersReward` is one, so it goes on the task class as it is::

    import verifiers.v1 as vf
    from veriscale.rewards.verifiers_env import VerifiersReward

    judge = VerifiersReward(model="http://127.0.0.1:8000/v1#judge", reference_column="answer")

    class MathData(vf.TaskData):
        answer: str

    class MathTask(vf.Task[MathData, vf.State, vf.TaskConfig]):
        veriscale = judge            # Task.score awaits judge(task=<MathData>, trace=<vf.Trace>)

    # or, without code, on any taskset: --env.taskset.task.rewards.veriscale.fn my_rewards.py:judge

verifiers runs each rollout of a group as its own episode, so a task reward sees one trace: it
is scored pointwise (the verifier's expected label value, in [0, 1]). The group-relative reward
(tournament + Bradley–Terry) needs the attempts side by side, which verifiers 0.4 gives only to
an env's ``finalize()`` over an episode that holds them all, as ``best-of-n`` does::

    from verifiers.v1.envs.best_of_n import BestOfNEnv

    class RankedBestOfN(BestOfNEnv):
        async def finalize(self, task, episode):
            await judge.rank_episode(episode)      # records reward 'veriscale' on each attempt
            await super().finalize(task, episode)

A trace that gets no reward (no completion, an empty one, or a failed verification) keeps
``trace.rewards["veriscale"] = None`` and is marked failed with the reason: that is how verifiers
0.4 says "not scored" (its own judges raise too). Never 0.

verifiers 0.3.x (the ``vf.Rubric`` stack)::

    rubric = vf.Rubric(funcs=[judge.rubric_function()], weights=[1.0])

With ``mode="group"`` (the default) the function is a group reward function
(``prompts, completions, answers, states, infos``): the Rubric calls it once per group of
rollouts of one example and it ranks them. With ``mode="pointwise"`` it is
``f(prompt, completion, answer, state, info, **kwargs)``. 0.3.x's Rubric turns a raised error or
None into 0.0, so a completion without a reward gets NaN instead (logged with the reason);
drop NaN rewards before computing advantages.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from veriscale.errors import UserError, VeriscaleError
from veriscale.rewards.batch import RewardBatch
from veriscale.rewards.texts import completion_text, prompt_text, with_reference
from veriscale.verify.reward import Verifier

if TYPE_CHECKING:  # verifiers is the optional [rl] extra: imported where it is used
    from verifiers.v1 import Episode, TaskData, Trace

logger = logging.getLogger(__name__)

NO_REWARD = float("nan")  # what a 0.3.x Rubric function returns for a completion without a reward


class RewardUnavailable(VeriscaleError):
    """A trace got no reward (no completion, or its verification failed); verifiers keeps it None."""


class VerifiersReward:
    """A verifiers 0.4 ``@vf.reward`` (``await reward(task, trace) -> float``), see the module."""

    def __init__(self, verifier: Verifier | None = None, *, model: str | None = None, mode: str | None = None,
                 criteria: str | None = None, reference_column: str | None = None, name: str = "veriscale",
                 weight: float = 1.0) -> None:
        from veriscale.rewards.configure import build_rewarder

        self.rewarder = build_rewarder(verifier, model=model, mode=mode, criteria=criteria)
        self.reference_column = reference_column
        self.weight = weight
        self.__name__ = name  # verifiers keys the reward by it: trace.rewards[name]
        try:
            from verifiers.v1 import reward as vf_reward
        except ImportError:  # a verifiers without v1: only rubric_function() is of use
            return
        vf_reward(self, weight=weight)  # the tags verifiers' Task.score looks for

    async def __call__(self, task: TaskData, trace: Trace) -> float:
        """The reward of one trace; :class:`RewardUnavailable` when it has none (verifiers records None)."""
        prompt, completion = trace_texts(task, trace, self.reference_column)
        if completion is None or not completion.strip():
            raise RewardUnavailable(f"trace {trace.id} has no completion to judge (the model's reply is empty), "
                                    "so it gets no reward")
        batch = await self.rewarder.arewards([prompt], [completion])
        self._record(trace, batch.criteria[0], batch)
        reward = batch.rewards[0]
        if reward is None:
            raise RewardUnavailable(f"trace {trace.id} could not be verified ({'; '.join(batch.errors)}), "
                                    "so it gets no reward")
        return reward

    async def rank_episode(self, episode: Episode) -> list[float | None]:
        """Reward the attempts of one episode against each other (call it from ``Env.finalize``).

        Records reward ``name`` on each trace and returns the rewards in ``episode.traces`` order.
        A trace whose run failed is not judged (verifiers does not score those either); one
        without a completion or whose verification failed gets None and is marked failed.
        """
        traces = list(episode.traces)
        for trace in traces:
            trace.rewards[self.__name__] = None  # until a reward is recorded, as verifiers seeds its own
        judged = [t for t in traces if t.ok]
        texts = [trace_texts(t.task.data, t, self.reference_column) for t in judged]
        batch = await self.rewarder.arewards([task for task, _ in texts], [completion for _, completion in texts])
        for local, (trace, reward) in enumerate(zip(judged, batch.rewards)):
            self._record(trace, batch.criteria[local], batch if local == 0 else None)  # the cost once
            if reward is None:
                trace.record_error(RewardUnavailable(
                    f"trace {trace.id} got no reward from the episode's ranking ({'; '.join(batch.errors)})"))
            else:
                trace.record_reward(self.__name__, reward, self.weight)
        return [trace.rewards[self.__name__].score if trace.rewards[self.__name__] else None for trace in traces]

    def rubric_function(self) -> Callable[..., Any]:
        """The reward function for a verifiers 0.3.x ``vf.Rubric(funcs=[...])`` (see the module)."""
        if self.rewarder.mode == "group":
            async def group_reward(prompts: Sequence[Any], completions: Sequence[Any], answers: Sequence[Any],
                                   states: Sequence[Any], infos: Sequence[Any] | None = None,
                                   **kwargs: Any) -> list[float]:
                for what, items in (("completions", completions), ("answers", answers), ("states", states)):
                    if len(items) != len(prompts):
                        raise UserError(f"{len(prompts)} prompts but {len(items)} {what}: "
                                        "give one of each per rollout of the group")
                infos = infos if infos is not None else [{}] * len(prompts)
                rows = [(p, c, a, s, i, {}) for p, c, a, s, i in zip(prompts, completions, answers, states, infos)]
                return await self._rubric_rewards(rows)

            function: Callable[..., Any] = group_reward
        else:
            async def rollout_reward(prompt: Any, completion: Any, answer: Any = "", state: Any = None,
                                     info: Any = None, **kwargs: Any) -> float:
                return (await self._rubric_rewards([(prompt, completion, answer, state, info, kwargs)]))[0]

            function = rollout_reward
        function.__name__ = function.__qualname__ = self.__name__  # the Rubric's metric name
        return function

    async def _rubric_rewards(self, rows: list[tuple[Any, Any, Any, Any, Any, Mapping[str, Any]]]) -> list[float]:
        """Rewards for (prompt, completion, answer, state, info, columns) rows; NaN where none."""
        try:
            tasks, responses = [], []
            for i, (prompt, completion, answer, state, info, columns) in enumerate(rows):
                task = prompt_text(prompt, i)
                if self.reference_column is not None:
                    task = with_reference(task, rubric_reference(self.reference_column, answer, info, state, columns))
                tasks.append(task)
                responses.append(completion_text(completion, i))
            batch = await self.rewarder.arewards(tasks, responses)
        except UserError as exc:  # the Rubric would log it and score 0.0: no reward instead
            logger.error("veriscale reward: %s: no completion of this call gets a reward (NaN)", exc)
            return [NO_REWARD] * len(rows)
        for error in batch.errors:
            logger.warning("veriscale reward: %s; that completion gets NaN (no reward)", error)
        return [NO_REWARD if r is None else r for r in batch.rewards]

    def _record(self, trace: Trace, criteria: Mapping[str, float | None], cost: RewardBatch | None) -> None:
        """Per-criterion scores as trace metrics; the judge's tokens (when given) on ``trace.extra_usage``."""
        for criterion, score in criteria.items():
            if score is not None:
                trace.record_metric(f"{self.__name__}_{criterion}", score)
        if cost is not None and cost.usage.model_calls:
            from verifiers.v1 import Usage

            trace.extra_usage.append(Usage(prompt_tokens=cost.usage.prompt_tokens,
                                           completion_tokens=cost.usage.completion_tokens))


def trace_texts(task: TaskData, trace: Trace, reference_column: str | None = None) -> tuple[str, str | None]:
    """A 0.4 trace as (task text, completion text): the task's prompt, the messages the model added.

    The prompt is ``task.prompt`` (with ``task.system_prompt`` as a system message when set; for
    a task without a prompt, the messages before the first model reply); the completion is the
    last branch from the first model reply on: replies, tool calls and tool results. None when
    the model never replied.
    """
    nodes = trace.branches[-1].nodes if trace.nodes else []
    first = next((i for i, node in enumerate(nodes) if node.sampled), len(nodes))
    if isinstance(task.prompt, str) and not task.system_prompt:
        text = task.prompt
    elif task.prompt is not None:
        prompt = task.prompt if isinstance(task.prompt, list) else [{"role": "user", "content": task.prompt}]
        system = [{"role": "system", "content": task.system_prompt}] if task.system_prompt else []
        text = prompt_text(system + _dicts(prompt), 0)
    else:
        text = prompt_text(_dicts([node.message for node in nodes[:first]]), 0)
    if reference_column is not None:
        text = with_reference(text, task_field(task, reference_column))
    if first == len(nodes):
        return text, None
    return text, completion_text(_dicts([node.message for node in nodes[first:]]), 0)


def task_field(task: TaskData, name: str) -> Any:
    """Field ``name`` of the task data, or a UserError naming the fields it has."""
    fields = set(type(task).model_fields) | set(task.model_extra or {})
    if name not in fields:
        from verifiers.v1 import TaskData as BaseData

        own = ", ".join(sorted(fields - set(BaseData.model_fields))) or "none beyond vf.TaskData's"
        raise UserError(f"the reward needs task field '{name}', but {type(task).__name__} has no such field "
                        f"(its own fields: {own}); add '{name}' to the TaskData or set reference_column to one it has")
    return getattr(task, name)


def rubric_reference(name: str, answer: Any, info: Any, state: Any, columns: Mapping[str, Any]) -> Any:
    """Column ``name`` of a 0.3.x rollout: ``answer``, a dataset column, or a key of ``info``."""
    if name == "answer":
        return answer
    row = state.get("input") if isinstance(state, Mapping) else None
    for source in (columns, info, row):
        if isinstance(source, Mapping) and name in source:
            return source[name]
    raise UserError(f"the reward needs dataset column '{name}', but the rollout has neither that column nor "
                    f"info['{name}']; add '{name}' to the dataset or set reference_column to one it has")


def _dicts(messages: Sequence[Any]) -> list[Any]:
    """verifiers' message models as the ``{"role", "content", ...}`` dicts :mod:`texts` reads."""
    return [m.model_dump(mode="json", exclude_none=True) if hasattr(m, "model_dump") else m for m in messages]


__all__ = ["RewardUnavailable", "VerifiersReward", "trace_texts"]
