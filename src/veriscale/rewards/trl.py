"""A reward function for TRL's ``GRPOTrainer(reward_funcs=...)``, in TRL's calling convention.

    from trl import GRPOTrainer
    from veriscale.rewards import TRLReward
    reward = TRLReward(model="http://127.0.0.1:8000/v1#judge", reference_column="solution")
    trainer = GRPOTrainer(model=..., reward_funcs=reward, train_dataset=dataset)

TRL calls it with keyword arguments: ``prompts`` and ``completions`` (strings, or lists of
``{"role", "content"}`` messages in the conversational format), ``completion_ids``,
``trainer_state``, ``log_extra``, ``log_metric`` and every other dataset column as a list. It
returns one float per completion, in order; None where a completion is missing or empty or its
verification failed (TRL turns None into NaN and leaves it out of the loss). The completions
of identical prompts in one call are one GRPO group and are ranked against each other
(``mode="group"``); ``mode="pointwise"`` scores each alone.

Per-criterion scores go to ``log_extra`` (columns ``veriscale_<criterion>``, with
``veriscale_group_size``, ``veriscale_group_scheme`` and ``veriscale_pointwise``: True where a value was
scored alone, on another scale than a ranked group's) and the cost to ``log_metric``
(``veriscale/model_calls``, ``veriscale/cache_hits``, ``veriscale/prompt_tokens``,
``veriscale/failed``, ``veriscale/comparisons``, ``veriscale/pointwise``), with the step's reward–length
correlation (``veriscale/reward_length_corr``, over completion token counts; :mod:`veriscale.rewards.length`,
``length_control="residual"`` for the length-controlled reward). A completion longer than the judge's
context is rendered to its budget (head and tail kept); one that still cannot fit gets None, alone. :class:`AsyncTRLReward` is the same reward as an ``async`` callable:
TRL runs async reward functions concurrently with each other on its own event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from veriscale.errors import UserError
from veriscale.rewards.batch import RewardBatch
from veriscale.rewards.texts import column_values, completion_text, prompt_text, with_reference
from veriscale.verify.reward import Verifier

#: keyword arguments TRL passes that are not dataset columns
TRL_CONTEXT = ("completion_ids", "trainer_state", "log_extra", "log_metric", "environments")


class TRLReward:
    """``reward(prompts=..., completions=..., **kwargs) -> list[float | None]`` (see the module)."""

    def __init__(self, verifier: Verifier | None = None, *, model: str | None = None, mode: str | None = None,
                 criteria: str | None = None, reference_column: str | None = None,
                 name: str = "veriscale", length_control: str | None = None) -> None:
        from veriscale.rewards.configure import build_rewarder

        self.rewarder = build_rewarder(verifier, model=model, mode=mode, criteria=criteria,
                                       length_control=length_control)
        self.reference_column = reference_column
        self.__name__ = name  # TRL logs the reward under its callable's name

    def inputs(self, prompts: Any, completions: Any, columns: Mapping[str, Any]) -> tuple[list[str], list[str | None]]:
        """The batch as task texts and response texts, checked."""
        for what, value in (("prompts", prompts), ("completions", completions)):
            if not isinstance(value, (list, tuple)):
                raise UserError(f"{what} must be a list, not {type(value).__name__}: TRL passes one item per completion")
        if len(prompts) != len(completions):
            raise UserError(f"{len(prompts)} prompts but {len(completions)} completions: "
                            "give one prompt per completion, repeated for each completion of a group")
        tasks = [prompt_text(p, i) for i, p in enumerate(prompts)]
        if self.reference_column is not None:
            refs = column_values(columns, self.reference_column, len(tasks))
            tasks = [with_reference(t, r) for t, r in zip(tasks, refs)]
        return tasks, [completion_text(c, i) for i, c in enumerate(completions)]

    def reward(self, prompts: Any, completions: Any, **kwargs: Any) -> RewardBatch:
        """The whole :class:`RewardBatch` (rewards, per-criterion scores, cost) for one call."""
        tasks, responses = self.inputs(prompts, completions, _columns(kwargs))
        return self.rewarder.rewards(tasks, responses, _lengths(kwargs.get("completion_ids"), responses))

    def __call__(self, prompts: Any, completions: Any, **kwargs: Any) -> list[float | None]:
        batch = self.reward(prompts, completions, **kwargs)
        log(batch, kwargs.get("log_extra"), kwargs.get("log_metric"))
        return batch.rewards


class AsyncTRLReward(TRLReward):
    """:class:`TRLReward` as an async callable, for TRL's concurrent async reward path."""

    async def __call__(self, prompts: Any, completions: Any, **kwargs: Any) -> list[float | None]:  # type: ignore[override]
        tasks, responses = self.inputs(prompts, completions, _columns(kwargs))
        batch = await self.rewarder.arewards(tasks, responses, _lengths(kwargs.get("completion_ids"), responses))
        log(batch, kwargs.get("log_extra"), kwargs.get("log_metric"))
        return batch.rewards


def _lengths(completion_ids: Any, responses: Sequence[str | None]) -> list[int] | None:
    """Each completion's token count from TRL's ``completion_ids`` (None: count characters)."""
    if not isinstance(completion_ids, (list, tuple)) or len(completion_ids) != len(responses):
        return None
    try:
        return [len(ids) for ids in completion_ids]
    except TypeError:
        return None


def _columns(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if k not in TRL_CONTEXT}


def log(batch: RewardBatch, log_extra: Callable[[str, Sequence[Any]], None] | None,
        log_metric: Callable[[str, float], None] | None) -> None:
    """Per-criterion columns to ``log_extra``, the batch's cost to ``log_metric`` (when given)."""
    if log_extra is not None:
        for name, values in batch.criterion_columns().items():
            log_extra(f"veriscale_{name}", values)
        log_extra("veriscale_group_size", batch.group_sizes)
        log_extra("veriscale_group_scheme", [batch.scheme] * len(batch.rewards))
        log_extra("veriscale_pointwise", batch.pointwise)  # scored alone: another scale than a ranked group
    if log_metric is not None:
        for name, value in batch.metrics().items():
            log_metric(f"veriscale/{name}", value)
