"""``select`` over a scripted test double of the Verifier: counts, groups, errors, reason, budget.

The double answers ``compare``/``score`` from a table of known qualities keyed by the rendered
candidate text, so the tests check what ``select`` does with verdicts, not what a model says.
"""

from __future__ import annotations

import math
from collections import Counter

import pytest

from veriscale.data.model import Candidate, Step, Task, Trajectory
from veriscale.engine.sync_facade import Usage
from veriscale.errors import UserError
from veriscale.selection.select import SelectionFailed, SelectionSettings, plan_selection, run_selection, select
from veriscale.verify.criteria import load_criteria
from veriscale.verify.results import CompareResult, ScoreResult
from veriscale.verify.scale import parse_scale

TAU = 0.1


class TokenCounterDouble:
    """Test double for a model backend: 4 characters a token, a fixed context window."""

    uri = "double"
    display_name = "double"
    is_embedded = False

    def __init__(self, context: int | None = 8192) -> None:
        self.context = context

    def count_tokens(self, text: str) -> int:
        return max(1, (len(text) + 3) // 4)

    def context_size(self) -> int | None:
        return self.context


class ScriptedVerifierDouble:
    """Test double for ``Verifier``: verdicts from known qualities, every call recorded.

    Criterion rewards: ``quality + offset[criterion]``; the "Output" criterion adds
    ``output_boost[text]`` so a test can make one criterion separate two candidates.
    """

    def __init__(self, qualities: dict[str, float], *, criteria: str = "agent", context: int | None = 8192,
                 fail_on: frozenset[str] = frozenset(), output_boost: dict[str, float] | None = None) -> None:
        self.model = TokenCounterDouble(context)
        self.criteria = load_criteria(criteria)
        self.scale = parse_scale("letters")
        self.reasoning = False
        self.repeats = 1
        self.injection_detect = True  # the Verifier's default
        self.usage = Usage()
        self.qualities = qualities
        self.fail_on = fail_on
        self.output_boost = output_boost or {}
        self.compare_calls: list[tuple[str, str, int | None]] = []
        self.score_calls: list[str] = []

    def _criteria_rewards(self, text: str) -> dict[str, float]:
        q = self.qualities[text]
        return {c.name: q + (self.output_boost.get(text, 0.0) if c.name == "Output" else 0.0)
                for c in self.criteria.items}

    def _base(self, errors: list[str]) -> dict:
        return dict(model="double", scale="letters:20", criteria_set=self.criteria.name, repeats_requested=1,
                    repeats_effective=1, discrete=False, errors=errors)

    def compare(self, task: str, a: str, b: str, *, only_repeat: int | None = None) -> CompareResult:
        self.compare_calls.append((a, b, only_repeat))
        self.usage.model_calls += 2 * len(self.criteria.items)
        if a in self.fail_on or b in self.fail_on:
            return CompareResult(**self._base(["Output: connection refused"]), tau=TAU)
        ra, rb = self._criteria_rewards(a), self._criteria_rewards(b)
        crits = {n: {"reward_a": ra[n], "reward_b": rb[n]} for n in ra}
        reward_a, reward_b = sum(ra.values()) / len(ra), sum(rb.values()) / len(rb)
        p = 1.0 / (1.0 + math.exp(-(reward_a - reward_b) / TAU))
        return CompareResult(**self._base([]), reward_a=reward_a, reward_b=reward_b, p_a_wins=p, tau=TAU,
                             criteria=crits)

    async def acompare(self, task: str, a: str, b: str, *, only_repeat: int | None = None) -> CompareResult:
        return self.compare(task, a, b, only_repeat=only_repeat)  # the selection awaits this form

    async def ascore(self, task: str, text: str) -> ScoreResult:
        return self.score(task, text)

    def score(self, task: str, text: str) -> ScoreResult:
        self.score_calls.append(text)
        self.usage.model_calls += len(self.criteria.items)
        r = self._criteria_rewards(text)
        return ScoreResult(**self._base([]), reward=sum(r.values()) / len(r),
                           criteria={n: {"reward": v} for n, v in r.items()})


def pool(qualities: list[float], task: Task | None = None) -> tuple[list[Candidate], dict[str, float]]:
    cands = [Candidate(id=f"run-{i}", text=f"answer number {i}", task=task) for i in range(len(qualities))]
    return cands, {c.text: q for c, q in zip(cands, qualities)}


TASK = Task(text="Print the number of lines in all log files.", id="count-logs")


@pytest.mark.parametrize("n,k", [(5, 1), (5, 2), (6, 3), (8, 4)])
def test_ppt_through_select_makes_the_paper_count_of_comparisons(n, k):
    cands, q = pool([0.1 * i for i in range(n)])
    double = ScriptedVerifierDouble(q)
    sel = select(TASK, cands, verifier=double, method="ppt", k=k, adaptive=False)
    expected = n + k * (n - k) + k * (k - 1) // 2
    assert sel.n_comparisons == expected
    assert len(double.compare_calls) == expected == sel.n_judgements
    assert sel.plan.comparisons_planned == expected
    assert sel.plan.model_calls_planned == expected * 6 == sel.usage.model_calls


def test_slot_order_alternates_with_the_repeat_passed_to_compare():
    cands, q = pool([0.2, 0.5, 0.4, 0.9, 0.1])
    double = ScriptedVerifierDouble(q)
    select(TASK, cands, verifier=double, method="ppt", k=2, adaptive=False)
    assert {r for _, _, r in double.compare_calls} == {0, 1}
    # A pair judged twice is shown in both slot orders: first (x, y, 0), later (x, y, 1).
    by_pair: dict[frozenset, list[tuple[str, str, int]]] = {}
    for a, b, r in double.compare_calls:
        by_pair.setdefault(frozenset((a, b)), []).append((a, b, r))
    repeated = [calls for calls in by_pair.values() if len(calls) == 2]
    assert repeated, "PPT re-meets some ring pairs in the pivot rounds"
    for (a0, b0, r0), (a1, b1, r1) in repeated:
        assert (a0, b0) == (a1, b1) and (r0, r1) == (0, 1)
    slot_a = [a for a, _, r in double.compare_calls if r % 2 == 0] + [b for _, b, r in double.compare_calls if r % 2]
    assert set(slot_a) == set(q)  # every candidate sat in slot A at least once


def test_select_picks_the_best_and_explains_by_the_separating_criterion():
    cands, q = pool([0.40, 0.55, 0.30, 0.52])
    double = ScriptedVerifierDouble(q, output_boost={"answer number 1": 0.15})
    sel = select(TASK, cands, verifier=double, method="round_robin", adaptive=False)
    assert sel.best.id == "run-1" and sel.index == 1
    assert sel.ranking[:2] == (1, 3)
    assert math.isclose(sum(sel.scores), 1.0)
    assert sel.criteria_scores[1]["Output"] == pytest.approx(0.70)
    assert sel.criteria_scores[1]["Errors"] == pytest.approx(0.55)
    top = sel.reason.gaps[0]
    assert top.criterion == "Output" and top.gap == pytest.approx(0.70 - 0.52)
    assert "Output +0.18" in sel.reason.text and "run-3" in sel.reason.text
    assert sel.reason.head_to_head is not None and sel.reason.head_to_head > 0.5
    data = sel.to_dict()
    assert data["best"]["id"] == "run-1" and data["ranking"][0]["index"] == 1
    assert data["n_comparisons"] == 6 and data["usage"]["model_calls"] == 6 * 2 * 6


def test_identical_outputs_are_judged_once():
    cands = [Candidate(id=f"run-{i}", text=t) for i, t in enumerate(["same", "other", "same", "third"])]
    double = ScriptedVerifierDouble({"same": 0.8, "other": 0.3, "third": 0.5})
    sel = select(TASK, cands, verifier=double, method="round_robin", adaptive=False)
    judged = [frozenset((a, b)) for a, b, _ in double.compare_calls]
    assert len(set(judged)) == 3  # 3 distinct outputs -> 3 pairs
    assert sel.n_comparisons == 3
    assert sel.best.text == "same"
    assert sel.scores[0] == sel.scores[2]
    assert (0, 2) in sel.ties
    assert sel.criteria_scores[0] == sel.criteria_scores[2]
    assert any("judged once" in n for n in sel.notes)


def test_single_candidate_is_returned_without_model_calls():
    double = ScriptedVerifierDouble({"only answer": 0.5})
    sel = select(TASK, [Candidate(id="solo", text="only answer")], verifier=double)
    assert sel.best.id == "solo" and sel.confidence == 1.0
    assert double.compare_calls == [] and sel.usage.model_calls == 0
    assert any("one candidate" in n for n in sel.notes)


def test_candidates_of_different_tasks_are_refused():
    a = Candidate(id="a", text="x", task=Task(text="task one", id="one"))
    b = Candidate(id="b", text="y", task=Task(text="task two", id="two"))
    with pytest.raises(UserError, match="different tasks"):
        select(None, [a, b], verifier=ScriptedVerifierDouble({"x": 0.1, "y": 0.2}))


def test_empty_pool_is_refused():
    with pytest.raises(UserError, match="no candidates"):
        select(TASK, [], verifier=ScriptedVerifierDouble({}))


def test_missing_task_is_refused_with_the_fix():
    cands, q = pool([0.1, 0.2])
    with pytest.raises(UserError, match=r"pass it as task$"):
        select(None, cands, verifier=ScriptedVerifierDouble(q))


def test_task_carried_by_the_runs_is_used():
    cands, q = pool([0.1, 0.9], task=TASK)
    sel = select(None, cands, verifier=ScriptedVerifierDouble(q), method="round_robin", adaptive=False)
    assert sel.task.id == "count-logs" and sel.best.id == "run-1"


def test_a_failed_comparison_stops_the_selection_instead_of_counting_as_a_tie():
    cands, q = pool([0.1, 0.5, 0.9])
    double = ScriptedVerifierDouble(q, fail_on=frozenset({"answer number 2"}))
    with pytest.raises(SelectionFailed, match="run-2.*connection refused.*rerun"):
        select(TASK, cands, verifier=double, method="round_robin", adaptive=False)


def test_adaptive_mode_reports_the_calls_it_saved():
    cands, q = pool([0.0, 0.1, 0.2, 0.9, 0.3, 0.15, 0.05, 0.25])
    double = ScriptedVerifierDouble(q)
    sel = select(TASK, cands, verifier=double, method="ppt", k=4, adaptive=True, min_confidence=0.8)
    assert sel.best.id == "run-3"
    assert sel.stop_reason == "confident" and sel.decided
    assert sel.n_judgements < sel.plan.judgements_planned
    assert sel.calls_saved == (sel.plan.judgements_planned - sel.n_judgements) * 6 > 0
    assert sel.usage.model_calls == sel.n_judgements * 6


def test_repeats_beyond_both_slot_orders_are_not_counted_twice():
    cands, q = pool([0.1, 0.2, 0.3])
    double = ScriptedVerifierDouble(q)
    sel = select(TASK, cands, verifier=double, method="round_robin", adaptive=False, repeats=5)
    assert sel.plan.repeats == 2 and sel.n_judgements == 6
    assert any("repeats lowered" in n for n in sel.notes)


def test_pointwise_scores_each_distinct_candidate_once():
    cands, q = pool([0.3, 0.8, 0.5])
    double = ScriptedVerifierDouble(q)
    sel = select(TASK, cands, verifier=double, method="pointwise")
    assert sel.best.id == "run-1" and sel.confidence is None and not sel.decided
    assert len(double.score_calls) == 3 and double.compare_calls == []


def test_default_budget_fits_both_candidates_in_the_context():
    long_text = "word " * 4000
    cands = [Candidate(id="a", text=long_text + "a"), Candidate(id="b", text=long_text + "b")]
    double = ScriptedVerifierDouble({}, context=2048)
    plan = plan_selection(TASK, cands, verifier=double)
    prompt_without_candidates = plan.prompt_tokens_upper_bound // plan.model_calls_upper_bound - 2 * plan.budget_tokens
    assert prompt_without_candidates + 2 * plan.budget_tokens <= 2048
    assert plan.budget_tokens < 1024
    with pytest.raises(UserError, match="use at most"):
        plan_selection(TASK, cands, verifier=double, budget_tokens=1500)


def test_unknown_method_and_bad_k_are_refused():
    cands, q = pool([0.1, 0.2])
    with pytest.raises(UserError, match="unknown"):
        select(TASK, cands, verifier=ScriptedVerifierDouble(q), method="swiss")
    with pytest.raises(UserError, match="pivots"):
        select(TASK, cands, verifier=ScriptedVerifierDouble(q), k=0)


def test_reason_names_gaps_even_criteria_and_where_the_runner_up_led():
    from veriscale.selection.reason import explain

    r = explain("w", "r", {"Output": 0.80, "Errors": 0.60, "Specification": 0.50},
                {"Output": 0.55, "Errors": 0.61, "Specification": 0.58}, head_to_head=0.7, confidence=0.95)
    assert [g.criterion for g in r.gaps] == ["Output", "Errors", "Specification"]
    assert "Output +0.25 (0.80 vs 0.55)" in r.text
    assert "Errors even" in r.text and "r led on Specification (-0.08)" in r.text
    assert "confidence 0.95" in r.text and "P(w wins) = 0.70" in r.text
    even = explain("w", "r", {"Output": 0.5}, {"Output": 0.51})
    assert "no criterion separates them" in even.text
    assert explain("w", None, {}, {}).runner_up is None


class CountingTokenizerDouble(TokenCounterDouble):
    """Test double for a model backend that counts how often each text is tokenised."""

    def __init__(self, context: int | None = 8192) -> None:
        super().__init__(context)
        self.tokenised: Counter[str] = Counter()

    def count_tokens(self, text: str) -> int:
        self.tokenised[text] += 1
        return super().count_tokens(text)


class MarkerVerifierDouble(ScriptedVerifierDouble):
    """``ScriptedVerifierDouble`` whose qualities are keyed by a marker the rendered text contains."""

    def _criteria_rewards(self, text: str) -> dict[str, float]:
        quality = next(q for marker, q in self.qualities.items() if marker in text)
        return {c.name: quality for c in self.criteria.items}


def trajectory_pool(n: int) -> list[Candidate]:
    """Runs long enough that rendering under a small budget elides steps."""
    return [
        Candidate(id=f"run-{i}", trajectory=Trajectory(
            steps=[Step("agent", f"step {s} of run {i}: " + "ls -la /app " * 30, observation=f"output {s} " * 40)
                   for s in range(8)],
            final_output=f"final answer {i}"))
        for i in range(n)
    ]


def test_plan_then_run_renders_and_tokenises_each_candidate_once():
    cands = trajectory_pool(5)
    double = MarkerVerifierDouble({f"final answer {i}": 0.1 * i for i in range(5)})
    double.model = CountingTokenizerDouble()
    plan = plan_selection(TASK, cands, verifier=double, method="round_robin", adaptive=False, budget_tokens=200)
    sel = run_selection(plan, verifier=double)
    assert sel.best.id == "run-4"
    texts = plan.pool.texts
    assert len(set(texts)) == 5 and all("steps elided" in t for t in texts)  # really rendered, under the budget
    assert [double.model.tokenised[t] for t in texts] == [1] * 5
    assert max(double.model.tokenised.values()) == 1  # no text (task, prompt, step, candidate) tokenised twice
    assert {t for a, b, _ in double.compare_calls for t in (a, b)} == set(texts)  # judged on the planned texts


def test_select_alone_tokenises_no_text_twice():
    cands, q = pool([0.3, 0.8, 0.5])
    double = ScriptedVerifierDouble(q)
    double.model = CountingTokenizerDouble()
    select(TASK, cands, verifier=double, method="knockout")
    assert [double.model.tokenised[c.text] for c in cands] == [1, 1, 1]
    assert max(double.model.tokenised.values()) == 1


def test_each_judgement_carries_the_rewards_the_criteria_scores_come_from():
    cands, q = pool([0.40, 0.55, 0.30])
    double = ScriptedVerifierDouble(q, output_boost={"answer number 1": 0.15})
    sel = select(TASK, cands, verifier=double, method="round_robin", adaptive=False)
    judgements = sel.tournament.comparisons
    for c in judgements:
        expected_i, expected_j = double._criteria_rewards(cands[c.i].text), double._criteria_rewards(cands[c.j].text)
        assert c.rewards == {n: (expected_i[n], expected_j[n]) for n in expected_i}
    outputs_of_1 = [c.rewards["Output"][0 if c.i == 1 else 1] for c in judgements if 1 in (c.i, c.j)]
    assert len(outputs_of_1) == 4 and sel.criteria_scores[1]["Output"] == pytest.approx(sum(outputs_of_1) / 4)
    assert set(sel.to_dict()["tournament"]["comparisons"][0]) == {"i", "j", "repeat", "p", "rewards"}


def test_a_pointwise_picks_reason_says_it_rests_on_the_pointwise_rewards_not_on_comparisons():
    cands, q = pool([0.600, 0.605])  # every criterion even: nothing but the two rewards separates them
    sel = select(TASK, cands, verifier=ScriptedVerifierDouble(q), method="pointwise")
    text = sel.reason.text
    assert sel.best.id == "run-1" and sel.n_comparisons == 0
    assert "pairwise" not in text and "head-to-head" not in text, text
    assert "the pick rests on the pointwise rewards alone (0.605 vs 0.600): no pair was compared" in text, text
    apart, q = pool([0.3, 0.8])  # a criterion separates them: the rewards are still named, no comparison claimed
    text = select(TASK, apart, verifier=ScriptedVerifierDouble(q), method="pointwise").reason.text
    assert "pairwise" not in text and "pointwise rewards 0.800 vs 0.300: no pair was compared" in text, text


def test_pointwise_scores_carry_their_criterion_rewards():
    cands, q = pool([0.3, 0.8])
    sel = select(TASK, cands, verifier=ScriptedVerifierDouble(q), method="pointwise")
    assert [(s.i, s.rewards["Errors"]) for s in sel.tournament.scores] == [(0, 0.3), (1, 0.8)]
    assert sel.criteria_scores[1]["Errors"] == pytest.approx(0.8)


def test_settings_object_and_keywords_are_the_same_selection():
    cands, q = pool([0.2, 0.5, 0.4, 0.9, 0.1])
    settings = SelectionSettings(method="ppt", k=1, adaptive=False, seed=4)
    by_object = select(TASK, cands, verifier=ScriptedVerifierDouble(q), settings=settings)
    by_keywords = select(TASK, cands, verifier=ScriptedVerifierDouble(q), method="ppt", k=1, adaptive=False, seed=4)
    assert by_object.plan.settings == by_keywords.plan.settings == settings
    assert by_object.tournament == by_keywords.tournament and by_object.best.id == "run-3"


@pytest.mark.parametrize("bad, match", [
    (dict(method="swiss"), "unknown"), (dict(k=0), "pivots"), (dict(repeats=0), "repeats"),
    (dict(min_confidence=0.0), "min_confidence"),
])
def test_bad_settings_are_one_user_error(bad, match):
    with pytest.raises(UserError, match=match):
        SelectionSettings(**bad)
