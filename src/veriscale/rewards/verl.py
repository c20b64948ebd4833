"""veRL reward functions: veriscale's verifier as veRL's ``compute_score``.

veRL loads a custom reward function from a module path and a function name. With veRL 0.9::

    reward.custom_reward_function.path=pkg://veriscale.rewards.verl
    reward.custom_reward_function.name=compute_score_async        # or compute_score

veRL also takes the module's file path (older releases read the top-level
``custom_reward_function.path``/``.name``); the file imports veriscale absolutely, so it
works loaded by path: ``python -c "import veriscale.rewards.verl as m; print(m.__file__)"``.
The verifier is :func:`veriscale.rewards.configure.default_rewarder`'s, from
``VERISCALE_REWARD_MODEL`` or the config file's ``[rewards]`` table where veRL's reward
workers run (``+ray_kwargs.ray_init.runtime_env.env_vars.VERISCALE_REWARD_MODEL=...``).

The functions, in veRL's calling conventions:

``compute_score(data_source, solution_str, ground_truth, extra_info=None, **options)``
    One response, scored pointwise; returns a dict (below). veRL's reward loop runs a sync
    function in a thread pool.
``compute_score_async(...)``
    The same as a coroutine function: veRL's reward loop (``NaiveRewardManager.run_single``)
    awaits it, so the rollouts it scores at once share the verifier's gateway.
``compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, **options)``
    For ``BatchRewardManager`` (``reward_manager=batch``): a list of dicts, one per response.
    Responses to identical prompts are one group and are ranked against each other
    (group-relative, :mod:`veriscale.rewards.group`). veRL 0.9's trainer scores one rollout
    at a time and no longer selects this manager; the per-sample functions score pointwise.

veRL gives ``compute_score`` no prompt. Its example preprocessing
(``examples/data_preprocess/gsm8k.py``) keeps the question in ``extra_info["question"]``, and
that key is the task the judge reads (a string or chat messages); a row without it is a
UserError. ``ground_truth`` is shown to the judge as the reference answer.

Each dict is ``{"score": ..., "veriscale_failed": 0.0|1.0, "veriscale_group_size": n,
"veriscale_pointwise": 0.0|1.0, "veriscale_reward_length_corr": r, "veriscale_<criterion>": ...}``
(``pointwise``: scored alone, a value on another scale than a ranked group's; ``reward_length_corr``:
the reward–length correlation over this process's last 512 responses, 0.0 until defined,
:mod:`veriscale.rewards.length`) with the same keys for every response (veRL collects the extra
keys of its first sample for all). A criterion that was not scored reads NaN.

A failed verification, or an empty response, has no score. veRL cannot take None (its reward
managers write the score into a float tensor, and None raises there) nor NaN (GRPO's group mean
and the loss turn NaN). So by default (``on_failure="raise"``) the function raises
:class:`VerificationFailed`: veRL 0.9's trainer (``trainer.use_v1``) marks that rollout's
group failed, and its sync mode trains on the group's other rollouts (the missing one padded
out) while its async modes replace the group; the legacy trainer and managers stop with it. ``on_failure="neutral"`` returns a score that
carries no preference instead, flagged ``veriscale_failed=1.0``: in ``compute_score_batch``
the mean reward of the group's verified responses (a GRPO advantage of 0), elsewhere, and in a
group with none verified, 0.5, the middle of the reward range (not neutral for pointwise PPO).

Options come from ``custom_reward_function.reward_kwargs`` (``+reward.custom_reward_function.
reward_kwargs.on_failure=neutral``): ``prompt_key`` (default ``"question"``),
``use_ground_truth`` (default true), ``on_failure`` (``"raise"`` or ``"neutral"``).
:func:`make_compute_score` binds the same functions to a rewarder you build::

    scorer = make_compute_score(BatchRewarder(Verifier(load_backend("http://127.0.0.1:8000/v1#judge"))))
    compute_score = scorer.compute_score_async      # in your own reward file, for veRL to load

The same functions that send their work to a Ray pool of verifiers, when one runs in veRL's
cluster, are :mod:`veriscale.rewards.verl_ray`'s (``make_compute_score`` also takes a
:class:`~veriscale.rewards.ray_pool.PoolRewarder`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from veriscale.errors import UserError, VeriscaleError
from veriscale.rewards.batch import BatchRewarder, RewardBatch
from veriscale.rewards.length import LengthMonitor
from veriscale.rewards.texts import prompt_text, with_reference
from veriscale.verify.reward import Verifier

DEFAULT_PROMPT_KEY = "question"
ON_FAILURE = ("raise", "neutral")
#: keyword arguments veRL itself passes to compute_score (beside reward_kwargs), ignored here
VERL_CONTEXT = ("reward_router_address", "reward_model_tokenizer")
_OPTIONS = ("prompt_key", "use_ground_truth", "on_failure")


class VerificationFailed(VeriscaleError):
    """A response veriscale could not verify: it has no score (see the module docstring)."""

    exit_code = 3


class Options:
    """The reward_kwargs a call was given, checked."""

    __slots__ = ("on_failure", "prompt_key", "use_ground_truth")

    def __init__(self, kwargs: Mapping[str, Any]) -> None:
        unknown = [k for k in kwargs if k not in _OPTIONS and k not in VERL_CONTEXT]
        if unknown:
            raise UserError(f"the veRL reward got unknown setting '{unknown[0]}' (from custom_reward_function."
                            f"reward_kwargs?): use {', '.join(_OPTIONS)}")
        self.prompt_key = kwargs.get("prompt_key", DEFAULT_PROMPT_KEY)
        self.use_ground_truth = kwargs.get("use_ground_truth", True)
        self.on_failure = kwargs.get("on_failure", "raise")
        if not isinstance(self.prompt_key, str) or not self.prompt_key:
            raise UserError(f"reward_kwargs.prompt_key must be the name of an extra_info key, not {self.prompt_key!r}")
        if not isinstance(self.use_ground_truth, bool):
            raise UserError(f"reward_kwargs.use_ground_truth must be true or false, not {self.use_ground_truth!r}")
        if self.on_failure not in ON_FAILURE:
            raise UserError(f"reward_kwargs.on_failure {self.on_failure!r} is unknown: use {' or '.join(ON_FAILURE)}")


def _plain(value: Any) -> Any:
    """numpy values (veRL's non-tensor batch) as plain Python ones."""
    return value.tolist() if hasattr(value, "tolist") and not isinstance(value, str) else value


def task_of(extra_info: Any, ground_truth: Any, options: Options, where: str = "extra_info") -> str:
    """The task the judge reads: ``extra_info[prompt_key]``, with the ground truth as reference."""
    key = options.prompt_key
    if not isinstance(extra_info, Mapping):
        raise UserError(f"{where} is {type(extra_info).__name__}, not a dict: put the prompt in each row's "
                        f"extra_info['{key}'] when you preprocess the data")
    if key not in extra_info:
        have = ", ".join(sorted(map(str, extra_info))) or "none"
        raise UserError(f"{where} has no '{key}' (the prompt the response answers; its keys: {have}): add the "
                        f"prompt to each row's extra_info['{key}'] when you preprocess the data, or set "
                        "custom_reward_function.reward_kwargs.prompt_key to the key that holds it")
    prompt = _plain(extra_info[key])
    if not isinstance(prompt, (str, list)):
        raise UserError(f"{where}['{key}'] is {type(prompt).__name__}: give the prompt as text or chat messages")
    task = prompt_text(prompt, 0)
    if not task.strip():
        raise UserError(f"{where}['{key}'] is empty: give the prompt the response answers")
    return with_reference(task, _plain(ground_truth)) if options.use_ground_truth else task


def _response(solution: Any, where: str) -> str:
    if not isinstance(solution, str):
        raise UserError(f"{where} is {type(solution).__name__}, not text: veRL passes the decoded response "
                        "(an empty response is '')")
    return solution


def _column(value: Any, name: str) -> list[Any]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(_plain(value), (list, tuple)):
        raise UserError(f"{name} must be a list with one item per response, not {type(value).__name__}")
    return list(value)  # numpy arrays of objects keep their items (dicts) as they are


class VerlScorer:
    """``compute_score``, ``compute_score_async`` and ``compute_score_batch`` bound to one rewarder."""

    def __init__(self, rewarder: BatchRewarder | Verifier | Any) -> None:
        """``rewarder``: a BatchRewarder, a Verifier (wrapped in a group-mode one) or anything with their
        ``rewards``/``arewards`` and a ``criterion_names`` list (a Ray pool's, :mod:`veriscale.rewards.ray_pool`)."""
        self.rewarder = BatchRewarder(rewarder) if isinstance(rewarder, Verifier) else rewarder
        names = getattr(self.rewarder, "criterion_names", None)
        self.criteria = list(names) if names is not None else [c.name for c in self.rewarder.verifier.criteria.items]
        self.lengths = LengthMonitor()  # the reward–length correlation over this process's last responses

    def compute_score(self, data_source: Any = None, solution_str: Any = None, ground_truth: Any = None,
                      extra_info: Any = None, **kwargs: Any) -> dict[str, float]:
        options = Options(kwargs)
        task, response = task_of(extra_info, ground_truth, options), _response(solution_str, "solution_str")
        return self._results(self.rewarder.rewards([task], [response]), options)[0]

    async def compute_score_async(self, data_source: Any = None, solution_str: Any = None,
                                  ground_truth: Any = None, extra_info: Any = None,
                                  **kwargs: Any) -> dict[str, float]:
        options = Options(kwargs)
        task, response = task_of(extra_info, ground_truth, options), _response(solution_str, "solution_str")
        return self._results(await self.rewarder.arewards([task], [response]), options)[0]

    def compute_score_batch(self, data_sources: Any = None, solution_strs: Any = None, ground_truths: Any = None,
                            extra_infos: Any = None, **kwargs: Any) -> list[dict[str, float]]:
        options = Options(kwargs)
        columns = {name: _column(value, name) for name, value in (
            ("data_sources", data_sources), ("solution_strs", solution_strs),
            ("ground_truths", ground_truths), ("extra_infos", extra_infos))}
        sizes = {name: len(values) for name, values in columns.items()}
        if len(set(sizes.values())) > 1:
            raise UserError("the batch's lists differ in length (" + ", ".join(f"{n} {k}" for k, n in sizes.items())
                            + "): give one data source, response, ground truth and extra_info per response")
        tasks = [task_of(e, g, options, f"extra_infos[{i}]")
                 for i, (e, g) in enumerate(zip(columns["extra_infos"], columns["ground_truths"]))]
        responses = [_response(s, f"solution_strs[{i}]") for i, s in enumerate(columns["solution_strs"])]
        return self._results(self.rewarder.rewards(tasks, responses), options)

    def _results(self, batch: RewardBatch, options: Options) -> list[dict]:
        if batch.failed and options.on_failure == "raise":
            first = next(i for i, r in enumerate(batch.rewards) if r is None)
            why = "; ".join(batch.errors[:3]) or "no reason given"
            where = "the response" if len(batch.rewards) == 1 else f"response {first} of {len(batch.rewards)}"
            raise VerificationFailed(f"veriscale could not verify {where} ({why}), so it has no score: veRL's "
                                     "V1 trainer leaves the rollout out, or set custom_reward_function."
                                     "reward_kwargs.on_failure=neutral to give it a neutral score")
        neutral = batch.neutral_filled().rewards
        self.lengths.add(batch.rewards, batch.lengths)
        corr = self.lengths.correlation()
        results = []
        for i, reward in enumerate(batch.rewards):
            row = {"score": neutral[i] if reward is None else float(reward), "veriscale_failed": float(reward is None),
                   "veriscale_group_size": float(batch.group_sizes[i]),
                   "veriscale_pointwise": float(batch.pointwise[i]),
                   "veriscale_reward_length_corr": 0.0 if corr is None else corr}
            for name in self.criteria:
                value = batch.criteria[i].get(name)
                row[f"veriscale_{name}"] = math.nan if value is None else float(value)
            results.append(row)
        return results


def make_compute_score(rewarder: BatchRewarder | Verifier) -> VerlScorer:
    """The veRL functions bound to ``rewarder`` (a Verifier is wrapped in a group-mode BatchRewarder)."""
    return VerlScorer(rewarder)


def _default() -> VerlScorer:
    from veriscale.rewards.configure import default_rewarder

    return VerlScorer(default_rewarder())


def compute_score(data_source: Any = None, solution_str: Any = None, ground_truth: Any = None,
                  extra_info: Any = None, **kwargs: Any) -> dict[str, float]:
    """One response's reward dict, pointwise, from the default rewarder (see the module docstring)."""
    return _default().compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)


async def compute_score_async(data_source: Any = None, solution_str: Any = None, ground_truth: Any = None,
                              extra_info: Any = None, **kwargs: Any) -> dict[str, float]:
    """:func:`compute_score` as a coroutine function, which veRL's reward loop awaits."""
    return await _default().compute_score_async(data_source, solution_str, ground_truth, extra_info, **kwargs)


def compute_score_batch(data_sources: Any = None, solution_strs: Any = None, ground_truths: Any = None,
                        extra_infos: Any = None, **kwargs: Any) -> list[dict[str, float]]:
    """Group-relative reward dicts for BatchRewardManager, from the default rewarder."""
    return _default().compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, **kwargs)


__all__ = ["VerificationFailed", "VerlScorer", "compute_score", "compute_score_async",
           "compute_score_batch", "make_compute_score"]
