"""Online tracking, events and VOC, with the scripted progress test double."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.scripted_progress import ScriptedProgressModel
from veriscale.data.model import Step
from veriscale.errors import UserError
from veriscale.progress import ProgressJudge, ProgressTracker, track, value_order_correlation, voc_by_outcome
from veriscale.progress.events import EventWatch
from veriscale.progress.step_records import RecordError, step_from_record

TEXTS = ["UP", "UP", "x", "x", "x", "x", "x", "DOWN DOWN", "UP UP UP"]


def test_online_updates_match_offline_checkpoints() -> None:
    seen = []
    tracker = ProgressTracker("t", judge=ProgressJudge(ScriptedProgressModel()), on_event=seen.append)
    for text in TEXTS:
        tracker.update({"role": "agent", "text": text})
    offline = track("t", [Step(role="agent", text=t) for t in TEXTS], judge=ProgressJudge(ScriptedProgressModel()))
    assert tracker.curve.values() == offline.values()
    assert [e.kind for e in tracker.curve.events] == [e.kind for e in offline.events] == [e.kind for e in seen]


def test_events_stall_regression_and_done_fire_once_each_episode() -> None:
    tracker = ProgressTracker("t", judge=ProgressJudge(ScriptedProgressModel()), watch=EventWatch(stall_window=4))
    kinds = []
    for text in TEXTS:
        tracker.update(Step(role="agent", text=text))
        kinds.append([e.kind for e in tracker.new_events])
    # values: .5 .5 .5 .5 .5 .5 .5 0 .75 -> stall after 4 flat points, regression at the drop
    assert kinds == [[], [], [], [], [], ["stall"], [], ["regression"], []]
    assert tracker.curve.values()[-1] == 0.75


def test_likely_done_fires_at_the_threshold() -> None:
    watch = EventWatch(done_threshold=0.75)
    events = [e for step, v in enumerate([0.2, 0.5, 0.8, 0.9], 1) for e in watch.push(step, v)]
    assert [(e.kind, e.step) for e in events] == [("likely_done", 3)]


def test_regression_rearms_after_recovery() -> None:
    watch = EventWatch(regression_drop=0.2, stall_window=50)
    values = [0.6, 0.3, 0.3, 0.6, 0.3]
    kinds = [[e.kind for e in watch.push(i, v)] for i, v in enumerate(values, 1)]
    assert kinds == [[], ["regression"], [], [], ["regression"]]


def test_async_updates_are_scored_in_arrival_order() -> None:
    tracker = ProgressTracker("t", judge=ProgressJudge(ScriptedProgressModel()))

    async def main() -> list:
        return await asyncio.gather(*(tracker.aupdate(Step(role="agent", text=t)) for t in ["UP", "UP", "UP"]))

    points = asyncio.run(main())
    assert [p.step for p in points] == [1, 2, 3] and [p.value for p in points] == [0.25, 0.5, 0.75]


def test_a_malformed_step_names_its_number() -> None:
    tracker = ProgressTracker("t", judge=ProgressJudge(ScriptedProgressModel()))
    tracker.update({"text": "UP"})
    with pytest.raises(UserError, match="step 2 is not a step object .*role 'robot'"):
        tracker.update({"role": "robot", "text": "x"})


@pytest.mark.parametrize("record, why", [
    ([], "JSON object"), ({"role": "agent"}, "empty"), ({"text": 3}, "strings"),
    ({"text": "x", "exit_code": "1"}, "exit_code"), ({"text": "x", "tool_calls": "ls"}, "tool_calls"),
])
def test_step_records_are_checked(record, why) -> None:
    with pytest.raises(RecordError, match=why):
        step_from_record(record)


def test_voc_values_and_undefined_cases() -> None:
    assert value_order_correlation([0.1, 0.2, 0.3, 0.4]) == pytest.approx(1.0)
    assert value_order_correlation([0.4, 0.3, 0.2, 0.1]) == pytest.approx(-1.0)
    assert value_order_correlation([0.1, None, 0.3, 0.2], steps=[1, 2, 3, 4]) == pytest.approx(0.5)
    assert value_order_correlation([0.5, 0.5, 0.5]) is None
    assert value_order_correlation([0.1, 0.9]) is None
    summary = voc_by_outcome([(0.9, True), (0.7, True), (0.1, False), (None, False)])
    assert summary["success"] == {"mean_voc": pytest.approx(0.8), "n": 2, "undefined": 0}
    assert summary["failure"] == {"mean_voc": pytest.approx(0.1), "n": 1, "undefined": 1}
