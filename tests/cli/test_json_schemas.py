"""Every ``--json`` output carries ``"schema": "veriscale.<kind>/1"`` and validates against its
JSON Schema (draft 2020-12) under ``src/veriscale/schemas/`` (docs/JSON.md lists them).

The commands run for real in process (typer's CliRunner on ``veriscale.cli:app``); model calls go to
the scripted test doubles (``--model scripted`` grades by the word GOOD, ``scripted-progress`` by
UP/DOWN words, ``scripted-chat`` replays one tool-calling script per harness phase), which answer at
once. ``harness run`` runs the protocol unjailed on a materialised fixture task; ``harness score``
re-grades its delivery with the example grader (examples/grader/grade.py) and reads it select-only.
A list output (``runs list``, ``harness skills list``) and each JSONL line (``runs export``) carry
the field on every object.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from tests.support.scripted_chat import ScriptedChat, call, say
from tests.support.scripted_model import ScriptedScoreModel
from tests.support.scripted_progress import ScriptedProgressModel
from veriscale import schemas
from veriscale.cli import app
from veriscale.models.read_strategy import ReadKind, ReadPlan
from veriscale.models.registry import SCHEMES, register_backend

REPO = Path(__file__).resolve().parents[2]
HARNESS_FIXTURES = REPO / "tests" / "fixtures" / "harness"
PROGRESS = REPO / "examples" / "progress"
EXAMPLE_GRADER = REPO / "examples" / "grader" / "grade.py"
# outputs the in-process run below does not reach; their schemas are still checked as schemas
NOT_RUN_HERE: set[str] = {"harness-evolve"}  # needs graded runs with feedback: tests/harness/test_evolve.py validates it


def _pick_only_scripts(base: str) -> dict:
    """The harness phases' scripted replies: empty ledgers, then adjudication picks ``base`` unrevised."""
    ledger = call("write", path="ledger.json", content=json.dumps({"entries": []}))
    return {"resolve": [ledger, say("done")], "challenge": [ledger, say("done")],
            "adjudicate": [call("write", path="finish.json",
                                content=json.dumps({"base": base, "revisions": [], "unresolved": []})), say("done")]}


class CheckableModel(ScriptedScoreModel):
    """The scripted double with the read plan ``models check`` reports (an exact, prefilled read)."""

    def read_plan(self) -> ReadPlan:
        return ReadPlan(ReadKind.EXACT, True, "embedded", "full-softmax")

    def _slot_text(self, request) -> str:  # the probe shows no response: graded as one without GOOD
        user = request.messages[-1].content
        return super()._slot_text(request) if "## Response" in user else ""


def _tag(doc) -> str:
    return doc["schema"].removeprefix("veriscale.").rsplit("/", 1)[0]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, list]:
    """Each command's --json output, by schema kind: {"score": [doc, ...], ...}."""
    saved = dict(SCHEMES)
    register_backend(("scripted",), lambda _uri: CheckableModel(), forms=("scripted",))
    register_backend(("scripted-progress",), lambda _uri: ScriptedProgressModel(), forms=("scripted-progress",))
    register_backend(("scripted-chat",), lambda _uri: ScriptedChat(_pick_only_scripts("r02")), forms=("scripted-chat",))
    root = tmp_path_factory.mktemp("json")
    store = str(root / "runs.sqlite3")
    texts = {"task": "Count the lines of every .log file under /var/log.",
             "good": "GOOD: find /var/log -name '*.log' -exec cat {} + | wc -l",
             "bad": "ls /var/log | wc -l", "worse": "echo 42"}
    f = {}
    for name, text in texts.items():
        f[name] = str(root / f"{name}.md")
        Path(f[name]).write_text(text + "\n")
    pairs = root / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"id": f"p{i}", "instruction": texts["task"], "output_1": texts["good"],
                                         "output_2": texts["bad"], "label": 1 + i % 2}) + "\n" for i in range(4)))
    solutions = root / "solutions.jsonl"
    solutions.write_text("".join(json.dumps({"id": f"s{i}", "problem": "Add 2 and 2, then double it.",
                                             "steps": ["UP 2 + 2 = 4", "UP 4 * 2 = 8" if i % 2 else "DOWN 4 * 2 = 6"],
                                             "label": -1 if i % 2 else 1}) + "\n" for i in range(4)))
    pool = root / "pool.jsonl"  # two tasks of two chat runs each (select-many)
    pool.write_text("".join(json.dumps({"id": f"{t}-{r}", "task_id": t, "messages": [
        {"role": "user", "content": texts["task"]}, {"role": "assistant", "content": texts["good" if r else "bad"]}]})
        + "\n" for t in ("t1", "t2") for r in (0, 1)))
    follow = root / "follow.jsonl"
    follow.write_text("".join(json.dumps({"role": "agent", "text": t, "observation": "ok"}) + "\n"
                              for t in ("UP read", "UP wrote", "nothing")))
    model = ["--model", "scripted", "--store", store]
    cmds = [
        ["score", f["task"], f["good"], *model, "--json"],
        ["score", f["task"], f["good"], *model, "--json", "--dry-run"],
        ["compare", f["task"], f["bad"], f["good"], *model, "--json"],
        ["compare", f["task"], f["bad"], f["good"], *model, "--json", "--dry-run"],
        ["select", f["bad"], f["good"], f["worse"], "--task", f["task"], *model, "--json"],
        ["select", f["bad"], f["good"], f["worse"], "--task", f["task"], *model, "--json", "--dry-run"],
        ["select-many", str(pool), "-o", str(root / "picks.jsonl"), *model, "--json"],
        ["track", str(PROGRESS / "fail_trajectory.json"), "--checkpoints", "2,4,6", "--model", "scripted-progress",
         "--store", store, "--json"],
        ["track", "--follow", str(follow), "--idle-timeout", "0.3", "--task", f["task"], "--model",
         "scripted-progress", "--store", store, "--json", "-o", str(root / "follow.progress.json")],
        ["bench", str(pairs), *model, "--criterion", "Correctness", "--json"],
        ["bench", str(pairs), *model, "--criterion", "Correctness", "--json", "--dry-run"],
        ["bench", "--progress", str(solutions), "--model", "scripted-progress", "--store", store, "--json"],
        ["bench", "--progress", str(solutions), "--model", "scripted-progress", "--store", store, "--json",
         "--dry-run"],
        ["models", "check", "scripted", "--store", store, "--json"],
        ["models", "calibrate", "scripted", "--pairs", str(pairs), "--limit", "4", "--store", store, "--json"],
        ["settings", "--json"],
        ["runs", "list", "--store", store, "--json"],
        ["runs", "show", "1", "--store", store, "--calls"],
        ["runs", "show", "2", "--store", store],
        ["runs", "cost", "1", "--store", store, "--json"],
        ["runs", "prune", "--status", "failed", "--dry-run", "--store", store, "--json"],
        ["runs", "vacuum", "--store", store, "--json"],
        ["harness", "skills", "list", "--json"],
        ["criteria", "list", "--json"],
        ["criteria", "show", "medical", "--json"],
        ["harness", "materialize", str(HARNESS_FIXTURES / "quarterly_report"), str(root / "task"), "--json"],
        ["harness", "claims", str(root / "task"), "--json"],
    ]
    found: dict[str, list] = {}
    runner = CliRunner()
    try:
        for cmd in cmds:
            result = runner.invoke(app, cmd)
            assert result.exit_code == 0, (cmd, result.output)
            doc = json.loads(result.stdout)
            for item in doc if isinstance(doc, list) else [doc]:
                found.setdefault(_tag(item), []).append(item)
        for cmd in (["runs", "export", "--store", store], ["runs", "export", "1", "--jsonl", "--store", store]):
            result = runner.invoke(app, cmd)
            assert result.exit_code == 0, (cmd, result.output)
            for line in result.stdout.splitlines():
                item = json.loads(line)
                found.setdefault(_tag(item), []).append(item)
        for line in (root / "picks.jsonl").read_text().splitlines():  # select-many's picks.jsonl lines
            found.setdefault(_tag(json.loads(line)), []).append(json.loads(line))
        whole = json.loads(runner.invoke(app, ["runs", "export", "1", "--store", store]).stdout)
        found.setdefault(_tag(whole), []).append(whole)
        found.setdefault("race", []).append(_race(root))
        for doc in _harness(root, store):
            found.setdefault(_tag(doc), []).append(doc)
    finally:
        SCHEMES.clear()
        SCHEMES.update(saved)
    return found


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _race(root: Path) -> dict:
    """``race -n 2 --json`` in a fresh repo, the agent a one-line Python edit."""
    repo = root / "repo"
    repo.mkdir()
    _git("init", "-q", "-b", "main", cwd=repo)
    (repo / "app.txt").write_text("v1\n")
    _git("add", ".", cwd=repo)
    _git("-c", "user.email=t@example.com", "-c", "user.name=T", "commit", "-qm", "start", cwd=repo)
    (root / "race_task.md").write_text("Improve app.txt.\n")
    agent = [sys.executable, "-c", "import os; open('app.txt', 'a').write('GOOD %d\\n' % os.getpid())"]
    here = os.getcwd()
    os.chdir(repo)
    try:
        result = CliRunner().invoke(app, ["race", "-n", "2", "--task", str(root / "race_task.md"), "--model", "scripted",
                                          "--store", str(root / "race.sqlite3"), "--json", "--", *agent])
    finally:
        os.chdir(here)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _harness(root: Path, store: str) -> list[dict]:
    """``harness run --json`` (one task delivered, one missing), then ``harness score --json`` of that
    run: re-graded over the delivered task and one never run, and select-only."""
    from veriscale.harness.workspace.materialize import materialize

    tasks = root / "harness"
    for name in ("quarterly_report", "data_cleanup"):
        materialize(HARNESS_FIXTURES / name, tasks / name, seed=11)
    runner = CliRunner()
    docs = []
    run = runner.invoke(app, ["harness", "run", str(tasks / "quarterly_report"), str(tasks / "not_a_task"),
                              "--model", "scripted-chat", "--contract", "pick-only", "--no-jail", "--run-id", "j",
                              "--store", store, "--json"])
    assert run.exit_code == 1, run.output  # the missing task failed; the other one was delivered
    docs.append(json.loads(run.stdout))
    grader = " ".join(shlex.quote(str(part)) for part in (sys.executable, EXAMPLE_GRADER, "--references", HARNESS_FIXTURES))
    regrade = runner.invoke(app, ["harness", "score", str(tasks / "quarterly_report"), str(tasks / "data_cleanup"),
                                  "--run-id", "j", "--grader", grader, "--json"])
    assert regrade.exit_code == 1, regrade.output  # data_cleanup has no run j: reported, not scored
    docs.append(json.loads(regrade.stdout))
    select = runner.invoke(app, ["harness", "score", str(tasks / "quarterly_report"), "--run-id", "j",
                                 "--select-only", "--json"])
    assert select.exit_code == 0, select.output
    docs.append(json.loads(select.stdout))
    return docs


def test_every_schema_file_is_a_valid_draft_2020_12_schema() -> None:
    names = schemas.names()
    assert {"score", "compare", "select", "track", "bench", "bench-progress", "runs-list", "run", "models-check",
            "settings", "race", "harness-run"} <= set(names)
    for name in names:
        schema = schemas.load(name)
        Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["properties"]["schema"] == {"const": f"veriscale.{name}/1"}
        assert "schema" in schema["required"]


def test_every_json_output_names_and_matches_its_schema(outputs) -> None:
    assert set(outputs) | NOT_RUN_HERE == set(schemas.names()), "a schema no command printed, or an output with none"
    for name, docs in outputs.items():
        validator = Draft202012Validator(schemas.load(name))
        for doc in docs:
            errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
            assert not errors, f"{name}: " + "; ".join(f"{list(e.path)}: {e.message}" for e in errors[:5])


def test_the_field_is_added_first_and_nothing_else_changes(outputs) -> None:
    score = outputs["score"][0]
    assert next(iter(score)) == "schema" and score["schema"] == "veriscale.score/1"
    assert {"reward", "run_id"} <= set(score)  # the fields the output had before are all still there
    assert all(next(iter(doc)) == "schema" for docs in outputs.values() for doc in docs)


def test_a_validation_failure_is_caught() -> None:
    """The schemas are not vacuous: a score without its reward, or a wrong version, fails."""
    validator = Draft202012Validator(schemas.load("score"))
    assert list(validator.iter_errors({"schema": "veriscale.score/2", "reward": 0.5}))
    assert list(validator.iter_errors({"schema": "veriscale.score/1"}))


def _valid(name: str, doc: dict) -> None:
    errors = sorted(Draft202012Validator(schemas.load(name)).iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, f"{name}: " + "; ".join(f"{list(e.path)}: {e.message}" for e in errors[:5])


def test_harness_run_json_matches_its_schema_with_a_delivered_and_a_failed_task(outputs) -> None:
    (doc,) = outputs["harness-run"]
    _valid("harness-run", doc)
    assert next(iter(doc)) == "schema" and doc["schema"] == "veriscale.harness-run/1"
    delivered, missing = doc["tasks"]
    assert (doc["run_id"], doc["contract"], doc["jail"], doc["failed"]) == ("j", "pick-only", "off", 1)
    assert delivered["outcome"] == "delivered" and delivered["base"] == "r02"
    assert set(delivered["phases"]) >= {"resolve", "challenge", "adjudicate", "deliver"}
    assert missing["outcome"] == "error" and "does not exist" in missing["error"]
    assert isinstance(doc["store_run"], int)


def test_harness_score_json_matches_its_schema_regrade_and_select_only(outputs) -> None:
    regrade, select = outputs["harness-score"]
    for doc in (regrade, select):
        _valid("harness-score", doc)
        assert next(iter(doc)) == "schema" and doc["schema"] == "veriscale.harness-score/1"
        assert Path(doc["file"]).is_file()
    assert regrade["mode"] == "regrade" and regrade["grader"] and regrade["preflight"]
    scored, never_run = regrade["tasks"]
    assert scored["base"] == "r02" and scored["revised"] is not None and scored["error"] is None
    assert never_run["final"] is None and never_run["error"] and regrade["failures"][0]["task"] == "data_cleanup"
    assert set(regrade["methods"]) == {"single_rollout", "select_only", "harness", "oracle"}
    assert select["mode"] == "select-only" and select["grader"] is None and select["preflight"] is None
    assert select["tasks"][0]["final"] == scored["select"]


@pytest.mark.parametrize(("name", "broken"), [
    ("harness-run", {"tasks": [{"task": "t", "task_dir": "/t"}]}),       # a task without its outcome
    ("harness-run", {"failed": -1}),
    ("harness-score", {"mode": "vote"}),
    ("harness-score", {"methods": {"harness": {"mean": 0.5}}}),           # an estimate without its interval
    ("harness-score", {"tasks": [{"task": "t"}]}),
])
def test_the_harness_schemas_are_not_vacuous(outputs, name: str, broken: dict) -> None:
    doc = {**outputs[name][0], **broken}
    assert list(Draft202012Validator(schemas.load(name)).iter_errors(doc))
