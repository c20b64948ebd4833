"""The cost controller (``--budget calls=N|tokens=N``): exact budgets, seeds, steps, cache, refusals.

The controller's logic runs on the simulated criteria judge (``tests.support.budget_sim``:
known qualities, a priced plan, a cache); the selection path runs the real ``Verifier``, its
executor and a real store over the scripted test double (``ScriptedScoreModel``: it grades by the
marker GOOD in its slot's response), so calls, cache hits and refusals are the real ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.scripted_model import ScriptedScoreModel, registered_scheme
from veriscale.cli import app
from veriscale.data.model import Candidate, Task
from veriscale.engine.gateway import _prompt_text
from veriscale.engine.run_log import RunLog
from veriscale.engine.store import Store
from veriscale.errors import BudgetExceeded, UserError
from veriscale.selection.budget.controller import Budget, BudgetController, parse_budget
from veriscale.selection.budget.verifier_judge import VerifierBudgetJudge
from tests.support.budget_sim import SimulatedCriteriaJudge, criteria_qualities, fixed_schedule
from veriscale.selection.core.schedules import ppt_comparison_count
from veriscale.selection.select import plan_selection, select
from veriscale.selection.settings import SelectionSettings
from veriscale.verify.reward import Verifier

TASK = Task(text="Name a prime number between 10 and 20.")
GOOD_AT = 3


def pool(n: int = 6) -> list[Candidate]:
    return [Candidate(id=f"run-{i}", text=("GOOD: 13 is prime" if i == GOOD_AT else f"answer {i}: {10 + 2 * i}"),
                      task=TASK) for i in range(n)]


@pytest.fixture()
def store(tmp_path: Path):
    s = Store.open(tmp_path / "store.sqlite3")
    yield s
    s.close()


def verifier(model: ScriptedScoreModel, store: Store, **kw) -> Verifier:
    return Verifier(model, store=store, criteria="general", **kw)


# -- the budget setting ------------------------------------------------------------------------
def test_budget_forms_parse_and_bad_ones_are_one_sentence_with_a_working_example():
    assert parse_budget("calls=60") == Budget("calls", 60)
    assert parse_budget(" Tokens = 40000 ") == Budget("tokens", 40000)
    for bad in ("60", "calls=", "calls=-3", "calls=0", "money=5", "calls=6.5"):
        with pytest.raises(UserError, match=r"is not a budget: write calls=N or tokens=N .* e\.g\. calls=60"):
            parse_budget(bad)
    with pytest.raises(UserError, match="method='round_robin'"):
        SelectionSettings(method="round_robin", budget="calls=10")


# -- the controller on the simulated judge -----------------------------------------------------
@pytest.mark.parametrize("kind", ["calls", "tokens"])
def test_the_controller_never_spends_more_than_the_budget(kind):
    for seed in range(5):
        n = 4 + seed
        full = ppt_comparison_count(n, 2) * 6
        for fraction in (0.1, 0.5, 1.0):
            amount = max(2, int(full * fraction)) * (1 if kind == "calls" else 500)
            judge = SimulatedCriteriaJudge(criteria_qualities(n, 3, seed=seed), seed=seed, tokens_per_call=500)
            outcome = BudgetController(Budget(kind, amount), n_criteria=3, seed=seed).run(n, judge)
            made = judge.calls if kind == "calls" else judge.calls * 500
            assert made == outcome.spent <= amount
            assert outcome.steps[-1].spent == outcome.spent and outcome.steps[-1].left == amount - outcome.spent


def test_same_seed_same_steps_and_pick():
    q = criteria_qualities(8, 3, seed=5)
    runs = [BudgetController("calls=60", n_criteria=3, seed=9).run(8, SimulatedCriteriaJudge(q, seed=5))
            for _ in range(2)]
    assert [s.to_dict() for s in runs[0].steps] == [s.to_dict() for s in runs[1].steps]
    assert runs[0].result.winner == runs[1].result.winner
    assert runs[0].result.comparisons == runs[1].result.comparisons
    other = BudgetController("calls=60", n_criteria=3, seed=10).run(8, SimulatedCriteriaJudge(q, seed=5))
    assert other.result.comparisons != runs[0].result.comparisons  # the seed is the ring's


def test_steps_escalate_from_a_ring_on_one_criterion_to_all_criteria_for_the_top_pair():
    q = criteria_qualities(8, 3, seed=2)
    judge = SimulatedCriteriaJudge(q, seed=2)
    outcome = BudgetController("calls=60", n_criteria=3, seed=0, min_confidence=0.999).run(8, judge)
    kinds = [s.kind for s in outcome.steps]
    assert kinds[0] == "ring" and "first criterion" in outcome.steps[0].added
    assert outcome.steps[0].judgements == 8 and outcome.steps[0].spent == 16  # 8 comparisons x 1 criterion x 2 slots
    assert "pivot" in kinds
    criteria = [s for s in outcome.steps if s.kind == "criteria"]
    assert criteria and "all 3 criteria" in criteria[0].added and "top pair" in criteria[0].why
    assert all(s.why for s in outcome.steps)
    assert [s.spent for s in outcome.steps] == sorted(s.spent for s in outcome.steps)
    record = outcome.to_dict()
    assert record["budget"] == "calls=60" and record["cache_hits_free"] is True
    assert [s["step"] for s in record["steps"]] == kinds


def test_a_budget_that_pays_for_ppt_on_every_criterion_judges_them_from_the_ring_on():
    n = 5
    full = ppt_comparison_count(n, 2) * 6
    outcome = BudgetController(f"calls={full}", n_criteria=3, seed=1).run(
        n, SimulatedCriteriaJudge(criteria_qualities(n, 3, seed=1), seed=1))
    assert "all 3 criteria" in outcome.steps[0].added and outcome.steps[0].spent == n * 6
    assert not any(s.kind == "criteria" for s in outcome.steps)


def test_a_clear_decision_stops_confident_before_the_budget_is_spent():
    q = criteria_qualities(6, 3, seed=0)
    q[2] += 6.0  # one candidate far ahead on every criterion
    judge = SimulatedCriteriaJudge(q, seed=0, noise=0.0)
    outcome = BudgetController("calls=500", n_criteria=3, seed=0).run(6, judge)
    assert outcome.stop_reason == "confident" and outcome.result.winner == 2
    assert outcome.spent < 500


def test_fixed_schedule_fits_pivots_and_criteria_to_the_budget():
    calls = lambda c: 2 * c  # noqa: E731
    assert fixed_schedule(8, 126, calls) == (2, 3)  # full PPT: 21 comparisons x 6 calls
    assert fixed_schedule(8, 31, calls) == (1, 1)   # 15 comparisons x 2 calls
    assert fixed_schedule(8, 10, calls) is None


def test_too_small_a_budget_is_refused_naming_the_smallest_that_works():
    judge = SimulatedCriteriaJudge(criteria_qualities(5, 3, seed=0), seed=0)
    with pytest.raises(UserError, match=r"budget='calls=1' cannot pay for one comparison \(2 model calls\).*"
                                        r"smallest budget that works here is budget='calls=2'"):
        BudgetController("calls=1", n_criteria=3).run(5, judge)
    assert judge.calls == 0
    assert BudgetController("calls=2", n_criteria=3).run(5, judge).spent == 2


# -- through select: the real verifier, executor and store --------------------------------------
def test_select_with_a_budget_spends_at_most_it_in_model_calls(store):
    model = ScriptedScoreModel()
    for amount in (2, 9, 24, 40):  # refresh: every decision starts cold, and its own calls are still free
        made = len(model.calls)
        sel = select(TASK, pool(), verifier=verifier(model, store, refresh=True), budget=f"calls={amount}", seed=1)
        assert len(model.calls) - made == sel.usage.model_calls == sel.budget["spent"] <= amount
    assert sel.best.id == f"run-{GOOD_AT}"
    steps = sel.to_dict()["budget"]["steps"]
    assert [s["step"] for s in steps[:2]] == ["granularity", "ring"] and steps[0]["spent"] == 0


def test_tokens_mode_counts_the_prompt_tokens_the_plan_sends(store):
    model = ScriptedScoreModel()
    sel = select(TASK, pool(), verifier=verifier(model, store), budget="tokens=3000", seed=2)
    sent = sum(model.count_tokens(_prompt_text(r)) for r in model.calls)
    assert sel.budget["kind"] == "tokens" and sent == sel.budget["spent"] <= 3000
    assert sel.budget["stop_reason"] in ("budget spent", "confident")


def test_cache_hits_do_not_count_against_the_budget(store):
    model = ScriptedScoreModel()
    first = select(TASK, pool(), verifier=verifier(model, store), budget="calls=30", seed=4)
    made = len(model.calls)
    assert made == first.budget["spent"] > 0
    again = select(TASK, pool(), verifier=verifier(model, store), budget="calls=30", seed=4)
    assert len(model.calls) == made  # the rerun over the warm store made no call
    assert again.budget["spent"] == 0 and again.usage.cache_hits == first.usage.model_calls + first.usage.cache_hits
    assert again.best.id == first.best.id


def test_too_small_a_budget_is_refused_before_any_call_and_in_the_plan(store):
    model = ScriptedScoreModel()
    with pytest.raises(UserError, match=r"smallest budget that works here is budget='calls=2'"):
        plan_selection(TASK, pool(), verifier=verifier(model, store), budget="calls=1")
    with pytest.raises(UserError, match=r"cannot pay for one comparison \(\d+ prompt tokens\).*budget='tokens=\d+'"):
        select(TASK, pool(), verifier=verifier(model, store), budget="tokens=5")
    assert model.calls == [] and store.count_calls() == 0


def test_max_calls_stays_the_hard_refusal(store):
    model = ScriptedScoreModel()
    with pytest.raises(BudgetExceeded):
        select(TASK, pool(), verifier=verifier(model, store, max_calls=3), budget="calls=40")
    assert len(model.calls) <= 3


def test_the_price_of_a_judgement_is_read_from_the_verifiers_plan(store):
    class OneCallPerSlotOrder(Verifier):  # what a joint layout plans: one call per slot order
        def plan_compare(self, task, a, b, only_repeat=None):
            calls, notes = super().plan_compare(task, a, b, only_repeat)
            return calls[:1], notes

    plan = plan_selection(TASK, pool(), verifier=verifier(ScriptedScoreModel(), store))
    separate = VerifierBudgetJudge(verifier(ScriptedScoreModel(), store), plan.pool)
    joint = VerifierBudgetJudge(OneCallPerSlotOrder(ScriptedScoreModel(), store=store, criteria="general"), plan.pool)
    assert (separate.cost(0, 1, 0, 0).calls, separate.cost(0, 1, 0, 1).calls) == (2, 6)
    assert (joint.cost(0, 1, 0, 0).calls, joint.cost(0, 1, 0, 1).calls) == (1, 1)


# -- the setting from flag, environment and config file -----------------------------------------
@pytest.fixture()
def cli_files(tmp_path: Path) -> dict[str, str]:
    paths = {"task": tmp_path / "task.md", "store": tmp_path / "runs.sqlite3"}
    paths["task"].write_text(TASK.text + "\n")
    for c in pool(5):
        paths[c.id] = tmp_path / f"{c.id}.md"
        paths[c.id].write_text(c.text + "\n")
    return {k: str(v) for k, v in paths.items()}


def run_select(files: dict[str, str], *extra: str, env: dict | None = None, config: str | None = None):
    with registered_scheme("scripted", lambda uri: ScriptedScoreModel(), ("scripted",)):
        args = [*(["--config", config] if config else []), "select", files["task"],
                *(files[f"run-{i}"] for i in range(5)), "--model", "scripted", "--store", files["store"],
                "--criteria", "general", "--refresh", "--json", *extra]
        return CliRunner().invoke(app, args, env=env)


def test_the_budget_reaches_select_from_flag_environment_and_config_file(cli_files, tmp_path):
    flag = run_select(cli_files, "--budget", "calls=8")
    assert flag.exit_code == 0, flag.output
    out = json.loads(flag.stdout)
    assert out["budget"]["budget"] == "calls=8" and out["usage"]["model_calls"] <= 8
    steps = RunLog(Store.open(cli_files["store"])).since(out["run_id"])
    assert [e.data["step"] for e in steps if e.kind == "budget"] == [s["step"] for s in out["budget"]["steps"]]

    env = json.loads(run_select(cli_files, env={"VERISCALE_BUDGET": "calls=6"}).stdout)
    assert env["budget"]["budget"] == "calls=6"
    config = tmp_path / "config.toml"
    config.write_text('[budget]\nper_decision = "tokens=2500"\n')
    filed = json.loads(run_select(cli_files, config=str(config)).stdout)
    assert filed["budget"]["budget"] == "tokens=2500" and filed["budget"]["spent"] <= 2500
    over = json.loads(run_select(cli_files, "--budget", "calls=4", config=str(config)).stdout)
    assert over["budget"]["budget"] == "calls=4"  # the flag wins over the file


def test_bad_budget_input_is_one_sentence_and_exit_2(cli_files, tmp_path):
    bad = run_select(cli_files, "--budget", "sixty")
    assert bad.exit_code == 2 and "--budget = 'sixty' is not a budget" in bad.output
    assert "Traceback" not in bad.output
    small = run_select(cli_files, "--budget", "calls=1")
    assert small.exit_code == 2 and "smallest budget that works here is --budget calls=2" in small.output
    env = run_select(cli_files, env={"VERISCALE_BUDGET": "calls=lots"})
    assert env.exit_code == 2 and "$VERISCALE_BUDGET = 'calls=lots' is not a budget" in env.output
    config = tmp_path / "config.toml"
    config.write_text('[budget]\nper_decision = "calls:9"\n')
    filed = run_select(cli_files, config=str(config))
    assert filed.exit_code == 2 and "budget.per_decision = 'calls:9' is not a budget" in filed.output


# -- the server's select jobs and the dashboard's run view --------------------------------------
def test_a_select_job_with_a_budget_records_its_steps_for_the_run_page(tmp_path, cli_files):
    from tests.support.dashboard import dashboard

    paths = [cli_files["task"], *(cli_files[f"run-{i}"] for i in range(5))]
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel(), roots=(tmp_path,)) as d, d.client() as c:
        refused = d.wait(d.submit("select", {"paths": paths, "criteria": "general", "budget": "calls=1"})["id"])
        assert refused["status"] != "done" and "smallest budget that works" in json.dumps(refused)
        done = d.wait(d.submit("select", {"paths": paths, "criteria": "general", "budget": "calls=10"})["id"])
        assert done["status"] == "done", done
        view = c.get(f"/api/runs/{done['run_id']}/selection").json()
        assert view["budget"]["budget"] == "calls=10" and view["usage"]["model_calls"] <= 10
        assert [s["step"] for s in view["budget"]["steps"][:2]] == ["granularity", "ring"]
        events = [e for e in RunLog(d.store).since(done["run_id"]) if e.kind == "budget"]
        assert [e.data for e in events] == view["budget"]["steps"]


def test_dry_run_shows_the_budget_capped_plan_and_refuses_a_too_small_one(cli_files):
    plan = run_select(cli_files, "--budget", "calls=20", "--dry-run")
    assert plan.exit_code == 0, plan.output
    out = json.loads(plan.stdout)
    assert out["budget"] == "calls=20" and out["model_calls_planned"] <= 20 and out["smallest_budget"] == 2
    assert any("cache hits do not count" in n for n in out["notes"])
    small = run_select(cli_files, "--budget", "calls=1", "--dry-run")
    assert small.exit_code == 2 and "smallest budget that works here is --budget calls=2" in small.output
    assert Store.open(cli_files["store"]).count_calls() == 0
