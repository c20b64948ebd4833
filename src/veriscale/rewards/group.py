"""Group-relative rewards: the completions of one prompt ranked against each other.

GRPO's advantage is a completion's reward minus its group's mean. When every completion of a
group is wrong, pointwise rewards are all near 0 and the advantages vanish. Judged against
each other instead (tournament + Bradley–Terry, :mod:`veriscale.selection`), the less wrong
completions still rank higher, so the group keeps a gradient::

    rewarder = GroupRewarder(Verifier(load_backend("embedded")))
    rewarder.rewards("Sort numbers.txt", ["sort -n numbers.txt", "cat numbers.txt", None])
    # [0.73, 0.27, None]   -- None: no completion to judge (never a 0)

A completion's reward is its Bradley–Terry probability of beating an average other member of
its group, mean_j σ(θ_i − θ_j), in (0, 1). Identical completions get the same reward; a group
whose completions are all identical gets 0.5 each. A group whose verification failed gets None
for every member: a failed judgement is never a score.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from veriscale.data.model import Candidate, Task
from veriscale.engine.usage import Usage
from veriscale.selection.select import Selection, SelectionFailed, SelectionSettings, select
from veriscale.verify.reward import Verifier

#: Tournament settings for a reward group: round robin judges every pair, so each completion's
#: reward rests on the whole group, not on the pivots a PPT picked.
GROUP_SETTINGS = SelectionSettings(method="round_robin", adaptive=False)


@dataclass
class GroupResult:
    """The rewards of one group, in the order given, and why any is None."""

    rewards: list[float | None]
    errors: list[str] = field(default_factory=list)
    selection: Selection | None = None
    #: each member's mean reward per criterion over its judgements ({} where it has no reward)
    criteria: list[dict[str, float | None]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)  # what this group's judgements cost

    def __post_init__(self) -> None:
        if not self.criteria:
            self.criteria = [{} for _ in self.rewards]


def bradley_terry_rewards(strengths: Sequence[float]) -> list[float]:
    """mean_j σ(θ_i − θ_j) over the others j: each member's chance against an average other."""
    theta = np.asarray(strengths, dtype=float)
    if len(theta) == 1:
        return [0.5]
    from scipy.special import expit  # scipy only where a group is ranked

    wins = expit(theta[:, None] - theta[None, :])
    np.fill_diagonal(wins, 0.0)
    return [float(x) for x in wins.sum(axis=1) / (len(theta) - 1)]


class GroupRewarder:
    """Rewards completions relative to the others of their prompt (see the module docstring)."""

    def __init__(self, verifier: Verifier, settings: SelectionSettings = GROUP_SETTINGS) -> None:
        self.verifier = verifier
        self.settings = settings

    def group(self, task: str, completions: Sequence[str | None]) -> GroupResult:
        """The rewards of one prompt's completions; None for a missing or empty completion."""
        present = [i for i, text in enumerate(completions) if isinstance(text, str) and text.strip()]
        rewards: list[float | None] = [None] * len(completions)
        errors = [f"completion {i} is empty: nothing to judge" for i in range(len(completions)) if i not in present]
        if not present:
            return GroupResult(rewards, errors)
        if len(present) == 1:
            only = self.verifier.score(task, completions[present[0]])
            rewards[present[0]] = only.reward
            result = GroupResult(rewards, errors + list(only.errors), usage=only.usage)
            if only.reward is not None:
                result.criteria[present[0]] = {name: c["reward"] for name, c in only.criteria.items()}
            return result
        candidates = [Candidate(id=f"completion-{i}", text=completions[i]) for i in present]
        try:
            sel = select(Task(task), candidates, verifier=self.verifier, settings=self.settings)
        except SelectionFailed as exc:
            return GroupResult(rewards, errors + [str(exc)])
        strengths = sel.tournament.strengths if sel.tournament is not None else [0.0] * len(present)
        result = GroupResult(rewards, errors, sel, usage=sel.usage)
        for local, (index, reward) in enumerate(zip(present, bradley_terry_rewards(strengths))):
            rewards[index] = reward
            result.criteria[index] = dict(sel.criteria_scores[local])
        return result

    def rewards(self, task: str, completions: Sequence[str | None]) -> list[float | None]:
        return self.group(task, completions).rewards


def groups_by_prompt(prompts: Sequence[str]) -> list[list[int]]:
    """Indices of identical prompts, in first-seen order: ``["a", "b", "a"]`` -> ``[[0, 2], [1]]``."""
    found: dict[str, list[int]] = {}
    for i, prompt in enumerate(prompts):
        found.setdefault(prompt, []).append(i)
    return list(found.values())
