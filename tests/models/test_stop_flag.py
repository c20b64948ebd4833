"""The stop flag a run hands to every thread: its callbacks, their un-registration, and the flag
reaching threads started in its context (veriscale.models.cancel)."""

from __future__ import annotations

import threading

import pytest

from veriscale.models.cancel import StopFlag, Stopped, current_stop, in_this_context, on_stop, stopped, stopping_with


def test_a_callback_runs_once_at_the_set_and_at_once_when_already_set() -> None:
    stop, calls = StopFlag(), []
    stop.on_set(lambda: calls.append("first"))
    assert calls == []
    stop.set()
    stop.set()  # a second set calls nobody again
    assert calls == ["first"]
    stop.on_set(lambda: calls.append("late"))  # registered after the set: called now
    assert calls == ["first", "late"]


def test_an_unregistered_callback_is_not_called() -> None:
    stop, calls = StopFlag(), []
    undo = on_stop(stop, lambda: calls.append("x"))
    undo()
    stop.set()
    assert calls == []


def test_with_no_flag_on_stop_registers_nothing_and_its_undo_is_harmless() -> None:
    calls: list[str] = []
    undo = on_stop(None, lambda: calls.append("x"))
    undo()
    assert calls == []
    stopped(None)  # no flag: never stops


def test_the_flag_reaches_a_thread_started_in_its_context_and_stops_its_checks() -> None:
    stop, seen = StopFlag(), {}

    def work() -> None:
        seen["flag"] = current_stop()
        try:
            stopped(current_stop())
        except Stopped:
            seen["stopped"] = True

    with stopping_with(stop):
        stop.set()
        thread = threading.Thread(target=in_this_context(work))
        thread.start()
        thread.join(10)
    assert seen == {"flag": stop, "stopped": True}
    assert current_stop() is None  # the block ended: outside it there is no flag
    with pytest.raises(Stopped):
        stopped(stop)
