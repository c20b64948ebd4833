"""`veriscale runs list` summarises each recorded run: reward, P(A beats B), the pick, outcomes, errors.

The commands run for real in process (typer's CliRunner) on the scripted test double, reached
through the model-URI registry as ``--model scripted`` (``scripted:fail`` fails every call).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.scripted_model import ScriptedScoreModel, registered_scheme
from veriscale.cli import app, common
from veriscale.engine.store import Store
from veriscale.models.registry import SCHEMES, register_backend


def _scripted(uri: str) -> ScriptedScoreModel:
    model = ScriptedScoreModel()
    if uri == "scripted:fail":
        model.fail_when = lambda req: True
    return model


@pytest.fixture()
def scripted_scheme():
    with registered_scheme("scripted", _scripted, ("scripted", "scripted:fail")):
        yield


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, str]:
    texts = {"task": "Count the lines of every .log file under /var/log.",
             "good": "GOOD: find /var/log -name '*.log' -exec cat {} + | wc -l",
             "bad": "ls /var/log | wc -l",
             "worse": "echo 42"}
    paths = {}
    for name, text in texts.items():
        path = tmp_path / f"{name}.md"
        path.write_text(text + "\n")
        paths[name] = str(path)
    paths["store"] = str(tmp_path / "runs.sqlite3")
    return paths


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def listed(store: str) -> list[dict]:
    result = invoke("runs", "list", "--json", "--store", store)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_score_run_shows_its_reward(scripted_scheme, files):
    out = invoke("score", files["task"], files["good"], "--model", "scripted", "--json", "--store", files["store"])
    assert out.exit_code == 0, out.output
    reward = json.loads(out.stdout)["reward"]
    assert reward > 0.5  # the double grades GOOD high
    (run,) = listed(files["store"])
    assert run["command"] == "score" and run["summary"] == f"reward {reward:.3f}"


def test_compare_run_shows_p_a_wins_and_both_rewards(scripted_scheme, files):
    out = invoke("compare", files["task"], files["bad"], files["good"], "--model", "scripted", "--json",
                 "--store", files["store"])
    assert out.exit_code == 0, out.output
    verdict = json.loads(out.stdout)
    assert verdict["p_a_wins"] < 0.5  # A is the bad answer
    (run,) = listed(files["store"])
    assert run["summary"] == (f"P(A beats B) {verdict['p_a_wins']:.3f} "
                              f"(rewards {verdict['reward_a']:.3f} / {verdict['reward_b']:.3f})")


def test_select_run_shows_the_pick_and_its_confidence(scripted_scheme, files):
    out = invoke("select", files["bad"], files["good"], files["worse"], "--task", files["task"],
                 "--model", "scripted", "--criteria", "general", "--json", "--store", files["store"])
    assert out.exit_code == 0, out.output
    sel = json.loads(out.stdout)
    assert sel["best"]["id"] == "good"
    (run,) = listed(files["store"])
    assert run["summary"] == f"pick good (confidence {sel['confidence']:.2f})"


def test_failed_runs_show_their_error_text(scripted_scheme, files):
    failed_score = invoke("score", files["task"], files["good"], "--model", "scripted:fail", "--store", files["store"])
    assert failed_score.exit_code == 3
    failed_select = invoke("select", files["bad"], files["good"], "--task", files["task"], "--model", "scripted:fail",
                           "--criteria", "general", "--store", files["store"])
    assert failed_select.exit_code == 3
    select_run, score_run = listed(files["store"])
    assert score_run["status"] == "failed" and select_run["status"] == "failed"
    assert score_run["summary"].startswith("failed: ") and "scripted failure" in score_run["summary"]
    assert select_run["summary"].startswith("failed: ") and "scripted failure" in select_run["summary"]


def test_harness_run_shows_outcome_counts_and_unfinished_runs_say_so(files):
    store = Store.open(files["store"])
    run_id = store.start_run("harness run", "http://127.0.0.1:8000/v1#m", {"tasks": ["t1", "t2", "t3"]})
    store.finish_run(run_id, "ok", {"run_id": "h1", "failed": 1, "tasks": [
        {"task": "t1", "outcome": "revised"}, {"task": "t2", "outcome": "error", "error": "jail"},
        {"task": "t3", "outcome": "revised"}]})
    store.start_run("score", "embedded", {})  # killed before it recorded a result
    unfinished, harness = listed(files["store"])
    assert harness["summary"] == "3 tasks: 2 revised, 1 error"
    assert unfinished["status"] == "running" and unfinished["summary"].startswith("not finished")


def test_the_table_prints_the_summary(scripted_scheme, files, monkeypatch):
    monkeypatch.setattr(common.console, "_width", 200)  # a wide terminal: nothing wraps
    out = invoke("score", files["task"], files["bad"], "--model", "scripted", "--json", "--store", files["store"])
    reward = json.loads(out.stdout)["reward"]
    table = invoke("runs", "list", "--store", files["store"])
    assert table.exit_code == 0, table.output
    row = next(line for line in table.stdout.splitlines() if " score " in line)
    assert f"reward {reward:.3f}" in row and "scripted:test-double" in row


def test_track_and_progress_bench_runs_show_voc_and_f1(tmp_path, files):
    from tests.support.scripted_progress import ScriptedProgressModel

    saved = dict(SCHEMES)
    register_backend(("scripted-progress",), lambda uri: ScriptedProgressModel(), forms=("scripted-progress",))
    try:
        solutions = tmp_path / "solutions.jsonl"
        solutions.write_text("".join(json.dumps({"id": f"s{i}", "problem": "Add 2 and 2, then double it.",
                                                 "steps": ["UP 4", "UP 8" if i % 2 else "DOWN 6", "UP done"],
                                                 "label": -1 if i % 2 else 1}) + "\n" for i in range(4)))
        tracked = invoke("track", str(solutions), "--id", "s1", "--model", "scripted-progress", "--store", files["store"])
        assert tracked.exit_code == 0, tracked.output
        benched = invoke("bench", "--progress", str(solutions), "--model", "scripted-progress", "--store", files["store"])
        assert benched.exit_code == 0, benched.output
    finally:
        SCHEMES.clear()
        SCHEMES.update(saved)
    runs = {r["command"]: r["summary"] for r in listed(files["store"])}
    assert runs["track"] == "3 checkpoints, VOC 1.000"
    assert runs["bench --progress"] == "4 solutions, first-error F1 1.000"


def test_the_usage_line_names_tokens_sent_and_processed_apart(scripted_scheme, files):
    """The summary once called tokens *sent* 'processed' (93,204 for the README job, whose model
    evaluated about 9,700): it now says which is which, and 'unknown' where the backend did not say."""
    import re

    out = invoke("score", files["task"], files["good"], "--model", "scripted", "--store", files["store"])
    assert out.exit_code == 0, out.output
    line = " ".join(out.stdout.split())
    assert re.search(r"\d+ prompt tokens sent, (processed unknown|\d+ processed)", line), line
    assert "prompt tokens processed" not in line
