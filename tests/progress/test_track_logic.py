"""Offline tracking logic with the scripted progress test double: causality, layout, cost, errors."""

from __future__ import annotations

import re

import pytest

from tests.support.scripted_progress import ScriptedProgressModel
from veriscale.data.model import Candidate, Step, Task, Trajectory
from veriscale.errors import UserError
from veriscale.progress import ProgressJudge, track
from veriscale.progress.events import EventWatch


def steps(*texts: str) -> list[Step]:
    return [Step(role="agent", text=t, observation=f"output of step {i + 1}") for i, t in enumerate(texts)]


RISING = steps("UP", "look around", "UP", "UP", "check", "UP")


def judge(model: ScriptedProgressModel | None = None, **kw) -> ProgressJudge:
    return ProgressJudge(model or ScriptedProgressModel(), **kw)


def test_curve_follows_the_evidence_in_each_prefix() -> None:
    curve = track("Do the thing", RISING, judge=judge())
    assert curve.steps() == [1, 2, 3, 4, 5, 6]
    assert curve.values() == [0.25, 0.25, 0.5, 0.75, 0.75, 1.0]
    assert curve.voc == pytest.approx(0.9710, abs=1e-3)  # ranks of ties averaged (Spearman)
    assert [e.kind for e in curve.events] == ["likely_done"] and curve.events[0].step == 6
    assert all(abs(sum(p.label_probs.values()) - 1) < 1e-9 and p.label_mass == pytest.approx(0.9) for p in curve.points)


@pytest.mark.parametrize("budget", [None, 120])  # 120: forces elision of old middle steps
def test_checkpoint_t_never_depends_on_later_steps(budget) -> None:
    base = steps(*[("UP" if i % 3 == 0 else f"work item {i}") for i in range(12)])
    for t in range(1, len(base)):
        changed = base[:t] + [Step(role="agent", text="DOWN DOWN DOWN totally different", exit_code=1)] \
            + [Step(role="agent", text="extra")] * 5
        runs = []
        for trajectory, outcome in ((base, 1), (changed, 0)):
            model = ScriptedProgressModel()
            cand = Candidate(id="r", trajectory=Trajectory(trajectory, final_output=f"final {outcome}"),
                             labels={"reward": outcome}, task=Task("Do the thing"))
            curve = track(None, cand, judge=judge(model, budget_tokens=budget, step_tokens=60))
            runs.append((model.calls, curve))
        (calls_a, curve_a), (calls_b, curve_b) = runs
        assert [c.messages for c in calls_a[:t]] == [c.messages for c in calls_b[:t]], f"checkpoint {t} saw the future"
        assert curve_a.values()[:t] == curve_b.values()[:t]


def test_each_prompt_extends_the_previous_one_until_an_overflow() -> None:
    model = ScriptedProgressModel()
    many = steps(*[f"step text number {i} " * 8 for i in range(30)])
    curve = track("Do the thing", many, judge=judge(model, budget_tokens=400, step_tokens=60))
    users = [c.messages[-1].content.rsplit("## Question", 1)[0] for c in model.calls]
    rerendered = [p.rerendered for p in curve.points]
    assert curve.rerenders == sum(rerendered) >= 1
    for t in range(1, len(users)):
        assert users[t].startswith(users[t - 1]) != rerendered[t], f"checkpoint {t + 1}"
    assert "steps elided" in users[-1] and "[step 1]" in users[-1]
    # few re-renders: after each, the shown steps fill the budget again before the next
    assert curve.rerenders <= len(many) // 4


def test_chosen_checkpoints_and_every() -> None:
    assert track("t", RISING, [2, 5], judge=judge()).steps() == [2, 5]
    assert track("t", RISING, every=4, judge=judge()).steps() == [4, 6]


@pytest.mark.parametrize("kwargs, message", [
    (dict(trajectory=[]), "has no steps"),
    (dict(checkpoints=[3, 2]), "out of order (3 before 2)"),
    (dict(checkpoints=[2, 2]), "checkpoint 2 is given twice"),
    (dict(checkpoints=[2, 9]), "checkpoint 9 is beyond the trajectory, which has 6 steps"),
    (dict(checkpoints=[0]), "steps count from 1"),
    (dict(checkpoints=[]), "no checkpoints given"),
    (dict(checkpoints=[2], every=2), "not both"),
    (dict(every=0), "every 0"),
])
def test_bad_checkpoints_are_one_clear_sentence(kwargs, message) -> None:
    trajectory = kwargs.pop("trajectory", RISING)
    with pytest.raises(UserError, match=re.escape(message)):
        track("t", trajectory, judge=judge(), **kwargs)


def test_one_step_gives_a_point_and_says_why_there_is_no_voc() -> None:
    curve = track("t", RISING[:1], judge=judge())
    assert curve.values() == [0.25] and curve.voc is None
    assert any("at least 3 scored checkpoints" in n for n in curve.notes)


def test_a_failed_call_leaves_its_point_unscored_never_zero() -> None:
    model = ScriptedProgressModel()
    model.fail_at_step = 3
    curve = track("t", RISING, judge=judge(model))
    assert curve.values()[2] is None and curve.points[2].error and curve.failed
    assert curve.values()[3] == 0.75 and any("failed" in n for n in curve.notes)


def test_cached_rerun_costs_nothing(tmp_path) -> None:
    from veriscale.engine.store import Store

    store = Store.open(tmp_path / "s.sqlite3")
    first = track("t", RISING, judge=judge(store=store))
    model = ScriptedProgressModel()
    again = track("t", RISING, judge=judge(model, store=store))
    assert again.values() == first.values() and model.calls == []
    assert sum(p.cache_hits for p in again.points) == len(RISING) and again.prompt_tokens == 0


def test_empty_task_and_missing_task_are_named() -> None:
    with pytest.raises(UserError, match="task is empty"):
        track("  ", RISING, judge=judge())
    with pytest.raises(UserError, match="does not say what it was"):
        track(None, RISING, judge=judge())


def test_event_thresholds_are_checked() -> None:
    with pytest.raises(UserError, match="stall window 0"):
        EventWatch(stall_window=0)
    with pytest.raises(UserError, match="regression drop 2"):
        EventWatch(regression_drop=2)
