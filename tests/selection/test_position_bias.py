"""Position bias: per-order values of each pair and the mark, in the library and in ``select --json``.

The CLI runs for real in process on a scripted test double that grades whatever response sits in
the first slot as good (a judge with pure slot bias), so every pair flips with the slot order.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.scripted_model import ScriptedScoreModel, registered_scheme
from veriscale.cli import app
from veriscale.selection.core.judging import Judgement
from veriscale.selection.core.position_bias import POSITION_BIAS_GAP, is_position_biased, pair_orders


class FirstSlotFavouringModel(ScriptedScoreModel):
    """TEST DOUBLE: in a pairwise prompt the response shown first always reads as GOOD."""

    def _slot_text(self, req, header=None):
        user = req.messages[-1].content
        where = (header if header is not None else req.prefill).lower()
        if "## First response" in user and "first response" in where:
            return "GOOD"
        return super()._slot_text(req, header)


def test_the_two_orders_are_kept_apart_and_a_flip_is_marked() -> None:
    # judge(0, 2, 0): 0 shown first, P(0 ≻ 2) = 0.9999; judge(0, 2, 1): 2 shown first, P(0 ≻ 2) = 0.0106
    flipped = [Judgement(0, 2, 0, 0.9999), Judgement(0, 2, 1, 0.0106)]
    # a pair judged as (3, 1): repeat 0 shows 3 first; both orders agree that 1 is better
    steady = [Judgement(3, 1, 0, 0.2), Judgement(3, 1, 1, 0.3)]
    orders = pair_orders(flipped + steady)
    assert [(o["a"], o["b"]) for o in orders] == [(0, 2), (1, 3)]
    bias, calm = orders
    assert bias["a_first"] == pytest.approx(0.9999) and bias["b_first"] == pytest.approx(0.0106)
    assert bias["gap"] == pytest.approx(0.9893) and bias["position_bias"] is True
    # P(1 ≻ 3): 0.8 with 3 shown first (repeat 0), 0.7 with 1 shown first (repeat 1)
    assert calm["a_first"] == pytest.approx(0.7) and calm["b_first"] == pytest.approx(0.8)
    assert calm["position_bias"] is False and calm["n_a_first"] == calm["n_b_first"] == 1


def test_the_mark_needs_both_orders_opposite_sides_and_the_gap() -> None:
    assert is_position_biased(0.9, 0.1)
    assert not is_position_biased(0.6, 0.4)  # opposite sides, but a close call either way
    assert not is_position_biased(0.99, 0.51)  # both orders pick a
    assert not is_position_biased(0.99, None)  # one order never judged
    assert is_position_biased(0.5 + POSITION_BIAS_GAP / 2 + 0.01, 0.5 - POSITION_BIAS_GAP / 2)
    # a comparison without a slot order (a proxied pick's averaged pair) carries no order
    assert pair_orders([{"i": 0, "j": 1, "p": 0.7, "orders": "both slot orders"}]) == []


@pytest.fixture()
def biased_scheme():
    with registered_scheme("slotbiased", lambda uri: FirstSlotFavouringModel(), ("slotbiased",)):
        yield


def _select(tmp_path: Path, *extra: str):
    texts = {"task": "Name a prime number.", "a": "7", "b": "9", "c": "11"}
    for name, text in texts.items():
        (tmp_path / f"{name}.md").write_text(text + "\n")
    return CliRunner().invoke(app, [
        "select", *(str(tmp_path / f"{n}.md") for n in "abc"), "--task", str(tmp_path / "task.md"),
        "--model", "slotbiased", "--criteria", "general", "--method", "round_robin", "--no-adaptive",
        "--store", str(tmp_path / "s.sqlite3"), *extra])


def test_select_json_reports_each_pairs_orders_and_marks_position_bias(biased_scheme, tmp_path: Path) -> None:
    result = _select(tmp_path, "--json")
    assert result.exit_code in (0, 4), result.output  # 4: not decided, which a slot-biased judge may well be
    data = json.loads(result.stdout)
    orders = {(o["a"], o["b"]): o for o in data["pair_orders"]}
    assert set(orders) == {(0, 1), (0, 2), (1, 2)}
    for o in orders.values():  # round robin: each pair once in each slot order
        assert o["n_a_first"] == o["n_b_first"] == 1
        assert o["a_first"] > 0.5 > o["b_first"]  # the first slot always wins
        assert o["position_bias"] is True  # each verdict is the slot's alone: every pair is marked
    assert data["position_bias"] == [[0, 1], [0, 2], [1, 2]]


def test_select_table_names_the_pairs_that_flip(biased_scheme, tmp_path: Path) -> None:
    result = _select(tmp_path)
    assert result.exit_code in (0, 4), result.output
    line = next(line for line in result.stdout.splitlines() if line.startswith("position bias:"))
    assert "a vs b (" in line and "flip with the slot order" in line


def _compare(tmp_path: Path, *extra: str):
    for name, text in {"task": "Name a prime number.", "a": "7", "b": "9"}.items():
        (tmp_path / f"{name}.md").write_text(text + "\n")
    return CliRunner().invoke(app, [
        "compare", str(tmp_path / "task.md"), str(tmp_path / "a.md"), str(tmp_path / "b.md"),
        "--model", "slotbiased", "--criteria", "general", "--repeats", "2",
        "--store", str(tmp_path / "s.sqlite3"), *extra])


def test_compare_json_marks_a_verdict_that_flips_with_the_slot_order(biased_scheme, tmp_path: Path) -> None:
    result = _compare(tmp_path, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    orders = data["slot_orders"]
    assert orders["a_first"] > 0.5 > orders["b_first"] and orders["gap"] >= POSITION_BIAS_GAP
    assert orders["position_bias"] is True and data["position_bias"] is True


def test_compare_table_says_the_verdict_flips(biased_scheme, tmp_path: Path) -> None:
    result = _compare(tmp_path)
    assert result.exit_code == 0, result.output
    assert any(line.startswith("position bias: P(A beats B) is") for line in result.stdout.splitlines())


def test_an_honest_judge_is_not_marked(tmp_path: Path) -> None:
    with registered_scheme("steady", lambda uri: ScriptedScoreModel(), ("steady",)):
        for name, text in {"task": "Name a prime number.", "a": "7 GOOD", "b": "9"}.items():
            (tmp_path / f"{name}.md").write_text(text + "\n")
        result = CliRunner().invoke(app, [
            "compare", str(tmp_path / "task.md"), str(tmp_path / "a.md"), str(tmp_path / "b.md"), "--model", "steady",
            "--criteria", "general", "--repeats", "2", "--store", str(tmp_path / "s.sqlite3"), "--json"])
    assert result.exit_code == 0, result.output
    orders = json.loads(result.stdout)["slot_orders"]
    assert orders["a_first"] > 0.5 and orders["b_first"] > 0.5 and orders["position_bias"] is False


def test_a_task_given_second_gets_a_note(tmp_path: Path) -> None:
    """Issue 30: `compare a.md task.md b.md` judged a.md as the task with no word."""
    with registered_scheme("steady", lambda uri: ScriptedScoreModel(), ("steady",)):
        for name, text in {"task": "Name a prime number.", "a": "7 GOOD", "b": "9"}.items():
            (tmp_path / f"{name}.md").write_text(text + "\n")
        args = ["--model", "steady", "--criteria", "general", "--store", str(tmp_path / "s.sqlite3")]
        swapped = CliRunner().invoke(app, ["compare", str(tmp_path / "a.md"), str(tmp_path / "task.md"),
                                           str(tmp_path / "b.md"), *args])
        right = CliRunner().invoke(app, ["compare", str(tmp_path / "task.md"), str(tmp_path / "a.md"),
                                         str(tmp_path / "b.md"), *args])
    assert swapped.exit_code == 0, swapped.output
    said = " ".join(swapped.stderr.split())
    assert "a.md' was taken as the task" in said and "task.md' reads like the task" in said
    assert "reads like the task" not in right.stderr
