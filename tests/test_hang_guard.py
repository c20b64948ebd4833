"""The suites' hang guard: it stops a child that blocks or spins, and not one that is merely slow."""

from __future__ import annotations

import sys

import pytest

from tests.support.hang_guard import HangError, guarded_run


def test_a_child_blocked_on_nothing_is_stopped_as_a_hang():
    with pytest.raises(HangError, match="made no progress"):
        guarded_run([sys.executable, "-c", "import time; time.sleep(600)"], idle_s=3, capture_output=True)


def test_a_child_that_spins_past_its_cpu_budget_is_stopped():
    with pytest.raises(HangError):
        guarded_run([sys.executable, "-c", "while True: pass"], idle_s=60, cpu_budget_s=2, capture_output=True)


def test_a_child_that_keeps_working_is_left_to_finish_past_its_idle_window():
    # 5 s of steady work against a 2 s idle window: a wall-clock guard of 2 s would have fired
    done = guarded_run([sys.executable, "-c", "import time\nend = time.time() + 5\nwhile time.time() < end: pass\n"
                        "print('finished')"], idle_s=2, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "finished"
