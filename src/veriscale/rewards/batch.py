"""One reward per (prompt, response) pair of a trainer's batch: the core every adapter calls.

    rewarder = BatchRewarder(Verifier(load_backend("embedded")))           # mode="group"
    batch = rewarder.rewards(["Q: 2+2?", "Q: 2+2?", "Q: 3+3?"], ["4", "5", "6"])
    batch.rewards      # [0.7, 0.3, 0.8]: the first two ranked against each other, None on failure
    batch.criteria     # [{"Correctness": 0.8, ...}, ...] per-criterion scores of each response
    batch.usage        # model calls, cache hits, tokens this batch cost
    await rewarder.arewards(prompts, responses)                            # from async code

``mode="group"`` (the default) rewards the responses to identical prompts against each other
(:mod:`veriscale.rewards.group`): an all-wrong group still ranks the less wrong higher.
``mode="pointwise"`` scores each response alone with the verifier's expected label value, in
[0, 1]; identical (prompt, response) pairs are scored once and share the reward. ``scheme``
(``"round_robin"`` or ``"sparse"``, :mod:`veriscale.rewards.group`) ranks the groups;
``batch.scheme`` and ``batch.metrics()["comparisons"]`` say what it used. Either way a response that is missing, empty or could not be verified gets None, and
``errors`` says why: a failed verification is never a score.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from veriscale.engine import sync_edge
from veriscale.engine.usage import Usage
from veriscale.errors import UserError, setting
from veriscale.rewards.group import DEFAULT_GROUP_SCHEME, GROUP_SETTINGS, GroupRewarder, groups_by_prompt
from veriscale.rewards.length import LengthControl, check_length_control, correlation
from veriscale.selection.settings import SelectionSettings
from veriscale.verify.reward import Verifier

MODES = ("group", "pointwise")
NEUTRAL_REWARD = 0.5  # the middle of the reward range, for a group with nothing verified


@dataclass
class RewardBatch:
    """The rewards of a batch, in the order given, with what they rest on and what they cost."""

    rewards: list[float | None]
    group_sizes: list[int]
    criteria: list[dict[str, float | None]]
    errors: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    groups: list[int] = field(default_factory=list)        # each response's group, by first member
    unverified: list[bool] = field(default_factory=list)   # no reward of its own (None, or filled in)
    scheme: str = DEFAULT_GROUP_SCHEME                     # the group scheme that ranked the groups
    comparisons: int = 0                                   # pairwise comparisons judged, all groups
    #: a pointwise value (scored alone: mode pointwise, or a group of one), on another scale than
    #: a ranked group's Bradley–Terry rewards (those average 0.5 per group)
    pointwise: list[bool] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)       # each response's length (characters or tokens)
    #: reward–length correlation of the rewards given (veriscale.rewards.length); None: undefined
    length_corr: float | None = None
    length_corr_raw: float | None = None                   # before length control, when it is on
    #: per-response flags for OpenRLHF's extra_logs (``veriscale_<name>``: 1.0 or 0.0), e.g. partial_group
    flags: dict[str, list[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.groups = self.groups or list(range(len(self.rewards)))
        self.unverified = self.unverified or [r is None for r in self.rewards]
        self.pointwise = self.pointwise or [n == 1 for n in self.group_sizes]
        self.lengths = self.lengths or [0] * len(self.rewards)

    @property
    def failed(self) -> int:
        return sum(self.unverified)

    def neutral_filled(self) -> RewardBatch:
        """The batch with each missing reward (and criterion score) set to its group's mean of the
        verified ones, or 0.5 where none is verified: for trainers that cannot take None. In GRPO
        such a response has advantage 0 (no push either way); ``unverified`` still flags it."""
        def filled(values: list[float | None]) -> list[float]:
            out = []
            for i, value in enumerate(values):
                mates = [v for j, v in enumerate(values) if self.groups[j] == self.groups[i] and v is not None]
                out.append(value if value is not None else (sum(mates) / len(mates) if mates else NEUTRAL_REWARD))
            return out

        names = sorted({name for scores in self.criteria for name in scores}) or []
        columns = {name: filled([scores.get(name) for scores in self.criteria]) for name in names}
        criteria = [{name: columns[name][i] for name in names} for i in range(len(self.rewards))]
        return replace(self, rewards=filled(self.rewards), criteria=criteria)

    def criterion_columns(self) -> dict[str, list[float | None]]:
        """Per-criterion scores as columns (one value per response, None where unscored)."""
        names = sorted({name for scores in self.criteria for name in scores})
        return {name: [scores.get(name) for scores in self.criteria] for name in names}

    def metrics(self) -> dict[str, float]:
        """What the batch cost, as scalars a trainer can log."""
        out = {"model_calls": float(self.usage.model_calls), "cache_hits": float(self.usage.cache_hits),
               "prompt_tokens": float(self.usage.prompt_tokens), "failed": float(self.failed),
               "comparisons": float(self.comparisons), "pointwise": float(sum(self.pointwise))}
        if self.length_corr is not None:  # undefined (fewer than two verified, or no spread): not logged
            out["reward_length_corr"] = self.length_corr
        if self.length_corr_raw is not None:
            out["reward_length_corr_raw"] = self.length_corr_raw
        return out

    def to_openrlhf(self) -> dict[str, Any]:
        """OpenRLHF's remote reward answer: ``rewards``, ``scores`` and ``extra_logs`` lists."""
        failed = [1.0 if bad else 0.0 for bad in self.unverified]
        logs = {"veriscale_group_size": [float(n) for n in self.group_sizes], "veriscale_failed": failed,
                "veriscale_pointwise": [float(p) for p in self.pointwise]}
        for name, values in self.criterion_columns().items():
            logs[f"veriscale_{name}"] = values
        for name, values in self.flags.items():
            logs[f"veriscale_{name}"] = [float(v) for v in values]
        return {"rewards": self.rewards, "scores": self.rewards, "extra_logs": logs}


def check_pairs(prompts: Any, responses: Any) -> None:
    """UserError naming the list when prompts and responses are not equal-length lists."""
    for name, value in (("prompts", prompts), ("responses", responses)):
        if not isinstance(value, (list, tuple)):
            raise UserError(f"{name} must be a list, not {type(value).__name__}: give one item per completion")
    if len(prompts) != len(responses):
        raise UserError(f"{len(prompts)} prompts but {len(responses)} responses: give one prompt per response")
    bad = next((i for i, p in enumerate(prompts) if not isinstance(p, str)), None)
    if bad is not None:
        raise UserError(f"prompt {bad} is {type(prompts[bad]).__name__}, not text: give each prompt as a string")


class BatchRewarder:
    """Rewards for a batch of (prompt, response) pairs (see the module docstring)."""

    def __init__(self, verifier: Verifier, *, mode: str = "group",
                 settings: SelectionSettings = GROUP_SETTINGS, scheme: str = DEFAULT_GROUP_SCHEME,
                 length_control: str = "off") -> None:
        if mode not in MODES:
            raise UserError(f"reward {setting('mode', mode)} is unknown: use one of {', '.join(MODES)}")
        self.verifier, self.mode = verifier, mode
        self.grouper = GroupRewarder(verifier, settings, scheme=scheme)
        self.length_control = check_length_control(length_control)
        self.control = LengthControl() if length_control == "residual" else None

    def rewards(self, prompts: Sequence[str], responses: Sequence[str | None],
                lengths: Sequence[int] | None = None) -> RewardBatch:
        """``lengths``: each response's length for the length figures (default: its characters;
        TRL passes completion token counts)."""
        check_pairs(prompts, responses)
        return sync_edge.run(self.arewards(prompts, responses, lengths))

    async def arewards(self, prompts: Sequence[str], responses: Sequence[str | None],
                       lengths: Sequence[int] | None = None) -> RewardBatch:
        """:meth:`rewards` awaited on the caller's loop (each group's model calls too), one group after another."""
        check_pairs(prompts, responses)
        n = len(prompts)
        batch = RewardBatch([None] * n, [0] * n, [{} for _ in range(n)], scheme=self.grouper.scheme)
        batch.lengths = list(lengths) if lengths is not None else [len(r) if isinstance(r, str) else 0 for r in responses]
        by_prompt = groups_by_prompt(list(prompts))
        for members in by_prompt:
            for i in members:
                batch.groups[i] = members[0]  # the prompt's group, also in pointwise mode (neutral fill)
        if self.mode == "pointwise":
            await self._pointwise(prompts, responses, batch)
            return self._length_figures(batch)
        for members in by_prompt:
            result = await self.grouper.agroup(prompts[members[0]], [responses[i] for i in members])
            batch.errors += [f"prompt {members[0]}: {e}" for e in result.errors]
            batch.usage.add(result.usage)
            batch.comparisons += result.comparisons
            for local, i in enumerate(members):
                batch.rewards[i], batch.criteria[i] = result.rewards[local], result.criteria[local]
                batch.unverified[i] = result.rewards[local] is None
                batch.group_sizes[i] = len(members)
                batch.pointwise[i] = result.pointwise
        return self._length_figures(batch)

    def _length_figures(self, batch: RewardBatch) -> RewardBatch:
        return length_figures(batch, self.control)

    async def _pointwise(self, prompts: Sequence[str], responses: Sequence[str | None], batch: RewardBatch) -> None:
        """Each distinct (prompt, response) scored once (a group of one is scored pointwise); its
        duplicates get the same reward and criteria without a model call."""
        first: dict[tuple[str, Any], int] = {}
        for i, (prompt, response) in enumerate(zip(prompts, responses)):
            key = (prompt, response if isinstance(response, str) else None)
            if key in first:
                j = first[key]
                batch.rewards[i], batch.criteria[i] = batch.rewards[j], dict(batch.criteria[j])
                batch.unverified[i], batch.group_sizes[i] = batch.unverified[j], 1
                batch.pointwise[i] = True
                continue
            first[key] = i
            result = await self.grouper.agroup(prompt, [response])
            batch.errors += [f"prompt {i}: {e}" for e in result.errors]
            batch.usage.add(result.usage)
            batch.rewards[i], batch.criteria[i] = result.rewards[0], result.criteria[0]
            batch.unverified[i], batch.group_sizes[i] = result.rewards[0] is None, 1
            batch.pointwise[i] = True


def length_figures(batch: RewardBatch, control: LengthControl | None) -> RewardBatch:
    """The batch's reward–length correlation, and its rewards length-controlled when ``control`` is
    given; the one length step of every rewarder (in process, and the Ray pool's)."""
    if control is not None:
        batch.length_corr_raw = correlation(batch.rewards, batch.lengths)
        ranked = [g if not p else -1 - i for i, (g, p) in enumerate(zip(batch.groups, batch.pointwise))]
        batch.rewards = control.adjust(batch.rewards, batch.lengths, ranked)
    batch.length_corr = correlation(batch.rewards, batch.lengths)
    return batch
