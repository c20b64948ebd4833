"""Group-relative rewards: the completions of one prompt ranked against each other.

GRPO's advantage is a completion's reward minus its group's mean. When every completion of a
group is wrong, pointwise rewards are all near 0 and the advantages vanish. Judged against
each other instead (tournament + Bradley–Terry, :mod:`veriscale.selection`), the less wrong
completions still rank higher, so the group keeps a gradient::

    rewarder = GroupRewarder(Verifier(load_backend("embedded")))
    rewarder.rewards("Sort numbers.txt", ["sort -n numbers.txt", "cat numbers.txt", None])
    # [0.73, 0.27, None]   -- None: no completion to judge (never a 0)

Two schemes rank a group (``scheme=``, or the ``group_scheme`` setting through
:mod:`veriscale.rewards.configure`; each :class:`GroupResult` records the one it used):

- ``"round_robin"``: every pair, both slot orders: n(n−1)/2 comparisons (28 for a group of 8).
- ``"sparse"`` (the default; :mod:`veriscale.selection.core.sparse`): a ring, then the pairs whose
  order is still unsettled, at most 3n comparisons (24 for 8, 18–22 on average), Bradley–Terry
  over what was judged. On the simulated oracle its Kendall τ is within 0.01 of round robin's
  (``benchmarks/bench_group_cost.py``, docs/RL.md)::

    GroupRewarder(verifier, scheme="sparse").group(task, completions).comparisons   # <= 3n

A completion's reward is its Bradley–Terry probability of beating an average other member of
its group, mean_j σ(θ_i − θ_j), in (0, 1). Identical completions get the same reward; a group
whose completions are all identical gets 0.5 each. A group whose verification failed gets None
for every member: a failed judgement is never a score.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from veriscale.data.model import Candidate, Task
from veriscale.engine import sync_edge
from veriscale.engine.usage import Usage
from veriscale.errors import UserError, setting
from veriscale.models.context import ContextOverflow, learned_context
from veriscale.selection.core.aggregate import TournamentResult
from veriscale.selection.judge import VerifierJudge
from veriscale.selection.plan import SelectionPlan, plan_selection
from veriscale.selection.prompt_fit import fit_prompt
from veriscale.selection.rendering import Renderer
from veriscale.selection.select import Selection, SelectionFailed, SelectionSettings, aselect, criteria_means, paced
from veriscale.selection.core.sparse import asparse_ranking
from veriscale.verify.reward import Verifier
from veriscale.verify.results import ScoreResult

#: Tournament settings for a reward group: round robin judges every pair, so each completion's
#: reward rests on the whole group, not on the pivots a PPT picked.
GROUP_SETTINGS = SelectionSettings(method="round_robin", adaptive=False)

GROUP_SCHEMES = ("round_robin", "sparse")
DEFAULT_GROUP_SCHEME = "sparse"  # met the target of docs/RL.md ("Cheaper groups"); round_robin stays selectable


def check_scheme(scheme: str) -> str:
    """``scheme`` if it is a group scheme, else a UserError naming the choices."""
    if scheme not in GROUP_SCHEMES:
        raise UserError(f"reward {setting('group_scheme', scheme)} is unknown: use one of {', '.join(GROUP_SCHEMES)}")
    return scheme


@dataclass
class GroupResult:
    """The rewards of one group, in the order given, and why any is None.

    ``scheme``: the group scheme that ranked it; ``comparisons``: the comparisons it judged (each
    in both slot orders); ``tournament``: its judgements and fit (None: nothing was compared);
    ``selection``: round robin's whole Selection (None for the sparse scheme).
    """

    rewards: list[float | None]
    errors: list[str] = field(default_factory=list)
    selection: Selection | None = None
    scheme: str = DEFAULT_GROUP_SCHEME
    comparisons: int = 0
    tournament: TournamentResult | None = None
    #: each member's mean reward per criterion over its judgements ({} where it has no reward)
    criteria: list[dict[str, float | None]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)  # what this group's judgements cost
    pointwise: bool = False  # one completion scored alone: a pointwise value, not a ranked one

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

    def __init__(self, verifier: Verifier, settings: SelectionSettings = GROUP_SETTINGS, *,
                 scheme: str = DEFAULT_GROUP_SCHEME) -> None:
        self.verifier = verifier
        self.settings = settings
        self.scheme = check_scheme(scheme)

    def group(self, task: str, completions: Sequence[str | None]) -> GroupResult:
        """The rewards of one prompt's completions; None for a missing or empty completion."""
        return sync_edge.run(self.agroup(task, completions))

    async def agroup(self, task: str, completions: Sequence[str | None]) -> GroupResult:
        """:meth:`group` on the running loop: planning in a worker thread, every model call awaited here."""
        present = [i for i, text in enumerate(completions) if isinstance(text, str) and text.strip()]
        rewards: list[float | None] = [None] * len(completions)
        errors = [f"completion {i} is empty: nothing to judge" for i in range(len(completions)) if i not in present]
        if not present:
            return GroupResult(rewards, errors, scheme=self.scheme)
        if len(present) == 1:
            return await self._alone(task, completions[present[0]], present[0], rewards, errors)
        candidates = [Candidate(id=f"completion-{i}", text=completions[i]) for i in present]
        try:
            if self.scheme == "sparse":
                result, criteria = await self._sparse(task, candidates)
            else:
                sel = await aselect(Task(task), candidates, verifier=self.verifier, settings=self.settings)
                result = GroupResult([], selection=sel, usage=sel.usage, scheme=self.scheme,
                                     comparisons=sel.n_comparisons, tournament=sel.tournament)
                criteria = sel.criteria_scores
        except SelectionFailed as exc:
            return GroupResult(rewards, errors + [str(exc)], scheme=self.scheme)
        tournament = result.tournament
        strengths = tournament.strengths if tournament is not None else [0.0] * len(present)
        result.rewards, result.errors, result.criteria = rewards, errors, [{} for _ in rewards]
        for local, (index, reward) in enumerate(zip(present, bradley_terry_rewards(strengths))):
            rewards[index] = reward
            result.criteria[index] = dict(criteria[local])
        return result

    async def _alone(self, task: str, text: str, index: int, rewards: list[float | None],
                     errors: list[str]) -> GroupResult:
        """One completion scored pointwise, rendered to the judge's budget as a selection renders it
        (a completion longer than the context keeps its head and tail); one that still overflows is
        "not scored" (None, with the reason) rather than an exception that ends the trainer's call."""
        try:
            only = await self._score_fitted(task, text)
        except ContextOverflow as overflow:
            return GroupResult(rewards, errors + [f"completion {index} not scored: {overflow}"], scheme=self.scheme,
                               pointwise=True)
        rewards[index] = only.reward
        result = GroupResult(rewards, errors + list(only.errors), usage=only.usage, scheme=self.scheme, pointwise=True)
        if only.reward is not None:
            result.criteria[index] = {name: c["reward"] for name, c in only.criteria.items()}
        return result

    async def _score_fitted(self, task: str, text: str) -> ScoreResult:
        """``verifier.ascore`` on the task and completion as rendered for a one-slot prompt (planned
        again, once, for the context an overflow reply names)."""
        for attempt in range(2):
            shown_task, shown = await asyncio.to_thread(self._fitted, task, text)
            try:
                return await self.verifier.ascore(shown_task, shown)
            except ContextOverflow as overflow:
                if attempt or learned_context(overflow, self.verifier.model) is None:
                    raise
        raise AssertionError("unreachable")

    def _fitted(self, task: str, text: str) -> tuple[str, str]:
        """The task and completion as a one-slot prompt shows them (blocking: it counts tokens)."""
        fit = fit_prompt(self.verifier, Task(task), pairwise=False)
        shown = Renderer.for_model(self.verifier.model).candidate(Candidate(id="completion", text=text),
                                                                  fit.budget_tokens)
        return fit.task_text or task, shown

    async def _sparse(self, task: str, candidates: list[Candidate]
                      ) -> tuple[GroupResult, list[dict[str, float | None]]]:
        """The sparse scheme over the group, rendered as a selection renders it (planned once more
        for the context a too-long prompt's reply names)."""
        plan = await asyncio.to_thread(plan_selection, Task(task), candidates, verifier=self.verifier,
                                       settings=self.settings)
        try:
            return await self._run_sparse(plan)
        except ContextOverflow as overflow:
            if learned_context(overflow, self.verifier.model) is None:
                raise
        return await self._run_sparse(await asyncio.to_thread(plan_selection, Task(task), candidates,
                                                              verifier=self.verifier, settings=self.settings))

    async def _run_sparse(self, plan: SelectionPlan) -> tuple[GroupResult, list[dict[str, float | None]]]:
        before = self.verifier.usage.copy()
        tournament = await asparse_ranking(plan.n_candidates, paced(VerifierJudge(self.verifier, plan.pool).acompare,
                                                                    self.verifier),
                                           repeats=plan.repeats, groups=list(plan.pool.groups),
                                           seed=plan.settings.seed)
        names = [c.name for c in self.verifier.criteria.items]
        result = GroupResult([], usage=self.verifier.usage.since(before), scheme=self.scheme,
                             comparisons=tournament.n_comparisons, tournament=tournament)
        return result, criteria_means(tournament, names, plan.pool.groups)

    def rewards(self, task: str, completions: Sequence[str | None]) -> list[float | None]:
        return self.group(task, completions).rewards


def groups_by_prompt(prompts: Sequence[str]) -> list[list[int]]:
    """Indices of identical prompts, in first-seen order: ``["a", "b", "a"]`` -> ``[[0, 2], [1]]``."""
    found: dict[str, list[int]] = {}
    for i, prompt in enumerate(prompts):
        found.setdefault(prompt, []).append(i)
    return list(found.values())
