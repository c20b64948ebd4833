"""The cost controller plans G (``veriscale.selection.budget.scale``): the user's scale, lowered only
to what the backend can read in one call or where a tokens budget cannot pay for one comparison
at it, never raised, never lowered to save calls; recorded as the first step and in ``--json``.

The backend cap runs on a real ``llama_cpp.server`` asked for ``top_logprobs=5``; the budget logic
on the scripted test double (``ScriptedScoreModel``: grades by the marker GOOD, counts a token a
word) through the real Verifier, executor and store.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.scripted_model import ScriptedScoreModel
from veriscale.cli import app
from veriscale.data.model import Candidate, Task
from veriscale.engine.store import Store
from veriscale.errors import UserError
from veriscale.models.base import Message, ScoreRequest
from veriscale.selection.budget.controller import BudgetController
from veriscale.selection.budget.verifier_judge import VerifierBudgetJudge
from veriscale.selection.budget.scale import coarser, readable_labels
from veriscale.selection.select import plan_selection, select
from veriscale.verify.reward import Verifier
from veriscale.verify.scale import parse_scale

TASK = Task(text="Name a prime number between 10 and 20.")
FIVE = "labels:top,ok,meh,bad,nil"  # a scale that spells its labels out: its prompts grow with G


def pool(n: int = 4) -> list[Candidate]:
    return [Candidate(id=f"run-{i}", text="GOOD: 13 is prime" if i == 2 else f"answer {i}: {10 + 2 * i}", task=TASK)
            for i in range(n)]


@pytest.fixture()
def store(tmp_path: Path):
    s = Store.open(tmp_path / "store.sqlite3")
    yield s
    s.close()


def first_comparison_tokens(store: Store, scale: str) -> int:
    """What the controller's first comparison costs in prompt tokens on ``scale``."""
    v = Verifier(ScriptedScoreModel(), store=store, criteria="general", scale=scale)
    plan = plan_selection(TASK, pool(), verifier=v)
    return BudgetController("tokens=1").smallest_budget(4, VerifierBudgetJudge(v, plan.pool), list(plan.pool.groups))


def test_a_coarser_scale_keeps_its_family_and_is_never_finer() -> None:
    assert coarser(parse_scale("letters:20"), 5).labels == tuple("ABCDE")
    assert coarser(parse_scale("digits"), 3).labels == ("3", "2", "1")
    assert coarser(parse_scale(FIVE), 3).labels == ("top", "meh", "nil")  # best, worst, evenly between
    assert coarser(parse_scale("letters:5"), 20).name == "letters:5"  # never raised above the user's G
    assert coarser(parse_scale("yesno"), 1) is None


def test_a_calls_budget_keeps_the_users_g_because_a_coarser_one_saves_no_call(store: Store) -> None:
    sel = select(TASK, pool(), verifier=Verifier(ScriptedScoreModel(), store=store, criteria="general",
                                                 scale="letters:20"), budget="calls=12")
    g = sel.budget["granularity"]
    assert (g["scale"], g["lowered"], g["read_cap"]) == ("letters:20", False, None)
    assert "same calls" in g["why"] and sel.budget["steps"][0]["step"] == "granularity"
    assert sel.budget["steps"][0]["spent"] == 0 and sel.budget["spent"] <= 12


def test_a_tokens_budget_too_small_for_g_lowers_it_to_the_finest_scale_that_fits(store: Store) -> None:
    prices = {g: first_comparison_tokens(store, FIVE if g == 5 else coarser(parse_scale(FIVE), g).name)
              for g in (2, 3, 4, 5)}
    assert prices[5] > prices[4] > prices[3] > prices[2]  # the labels are spelt out in every prompt
    model = ScriptedScoreModel()
    sel = select(TASK, pool(), verifier=Verifier(model, store=store, criteria="general", scale=FIVE),
                 budget=f"tokens={prices[4]}")
    g = sel.budget["granularity"]
    assert g["scale"] == "labels:top,ok,bad,nil" and g["lowered"] and "finest that fits" in g["why"]
    assert sel.budget["spent"] <= prices[4] and model.calls
    assert all(call.labels == ("top", "ok", "bad", "nil") for call in model.calls)  # the calls read that scale
    assert any("G lowered from 5 to 4" in note for note in sel.notes)


def test_letters_cost_the_same_at_every_g_so_a_tokens_budget_below_them_is_refused(store: Store) -> None:
    assert first_comparison_tokens(store, "letters:20") == first_comparison_tokens(store, "letters:2")
    need = first_comparison_tokens(store, "letters:20")
    v = Verifier(ScriptedScoreModel(), store=store, criteria="general", scale="letters:20")
    with pytest.raises(UserError, match=f"the smallest budget that works here is budget='tokens={need}'"):
        plan_selection(TASK, pool(), verifier=v, budget=f"tokens={need - 1}")
    small = first_comparison_tokens(store, "labels:top,nil")  # a label scale names its floor on the coarsest G
    with pytest.raises(UserError, match=f"budget='tokens={small}'"):
        plan_selection(TASK, pool(), verifier=Verifier(ScriptedScoreModel(), store=store, criteria="general",
                                                        scale=FIVE), budget=f"tokens={small - 1}")


def test_a_server_showing_5_top_logprobs_cannot_read_20_labels_so_the_plan_lowers_g_to_5(
        llama_server: str, tmp_path: Path) -> None:
    from veriscale.models.uri import load_backend

    uri = f"{llama_server}?top_logprobs=5&read=top-k#smollm2"  # read=top-k: no wide (exact) read
    backend = load_backend(uri)
    assert readable_labels(Verifier(backend)) == 5 and readable_labels(Verifier(load_backend("embedded"))) is None
    # without read=top-k the probe finds the server's wide read: every label is read, no cap
    assert readable_labels(Verifier(load_backend(f"{llama_server}?top_logprobs=5#smollm2"))) is None
    # what veriscale does without the plan: a label outside the top 5 tokens reads as probability 0
    request = ScoreRequest(messages=(Message("user", "Grade this answer. " + parse_scale("letters:20").instruction()),),
                           prefill="Grade:", labels=parse_scale("letters:20").labels)
    shown = [lab for lab, p in backend.score(request).label_probs.items() if p > 0]
    assert 0 < len(shown) <= 5
    fixed = plan_selection(TASK, pool(3), verifier=Verifier(backend, scale="letters:20", criteria="general"))
    assert any("shows the top 5 tokens" in n and "scale='letters:5'" in n for n in fixed.notes)  # said, not lowered

    files = {"task": tmp_path / "task.md", **{c.id: tmp_path / f"{c.id}.md" for c in pool(3)}}
    files["task"].write_text(TASK.text + "\n")
    for c in pool(3):
        files[c.id].write_text(c.text + "\n")
    store = tmp_path / "runs.sqlite3"
    r = CliRunner().invoke(app, ["select", str(files["task"]), *(str(files[c.id]) for c in pool(3)), "--model", uri,
                                 "--store", str(store), "--criteria", "general", "--scale", "letters:20",
                                 "--budget", "calls=4", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    g = out["budget"]["granularity"]
    assert (g["asked"], g["scale"], g["read_cap"], g["lowered"]) == ("letters:20", "letters:5", 5, True)
    first = out["budget"]["steps"][0]
    assert first["step"] == "granularity" and first["added"] == "G = 5 (letters:5)" and "top 5 tokens" in first["why"]
    assert 0 < out["usage"]["model_calls"] <= 4
    s = Store.open(store)
    asked = [s.call(c["key"])["request"] for c in s.run_calls(out["run_id"])]
    assert asked and all(json.dumps(r).count("from A to E") and tuple(r["labels"]) == tuple("ABCDE") for r in asked)
