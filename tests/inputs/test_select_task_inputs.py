"""``select`` says which file it took as the task, and refuses a task with no candidate.

The CLI runs in a subprocess against the fault server (a real HTTP endpoint with fixed
probabilities); the dry runs send nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.inputs.cli import one_sentence, run_cli
from tests.support.fault_server import FaultServer


@pytest.fixture(scope="module")
def server():
    with FaultServer() as srv:
        yield srv


@pytest.fixture()
def answers(tmp_path: Path) -> dict[str, Path]:
    files = {}
    for name, text in (("a", "Sum the list with a loop."), ("b", "return sum(xs)"), ("c", "return max(xs)")):
        files[name] = tmp_path / f"{name}.md"
        files[name].write_text(text)
    return files


def _model(server: FaultServer, tmp_path: Path) -> list[str]:
    return ["--model", server.url + "#fault-model", "--store", str(tmp_path / "s.sqlite3")]


def test_select_says_it_took_the_first_file_as_the_task(server, answers, tmp_path):
    paths = [str(answers[n]) for n in "abc"]
    dry = run_cli("select", *paths, "--dry-run", "--json", *_model(server, tmp_path))
    assert dry.returncode == 0, dry.stderr
    assert f"took '{paths[0]}' as the task" in " ".join(dry.stderr.split()) and "--task" in dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["task_taken_from"] == paths[0] and plan["n_candidates"] == 2
    ran = run_cli("select", *paths, "--json", *_model(server, tmp_path))
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert result["task_taken_from"] == paths[0] and {c["id"] for c in result["ranking"]} == {"b", "c"}
    named = run_cli("select", "--task", paths[0], *paths[1:], "--dry-run", "--json", *_model(server, tmp_path))
    assert named.returncode == 0 and "took" not in named.stderr and "task_taken_from" not in json.loads(named.stdout)


def test_select_with_a_task_and_no_candidate_is_refused(server, answers, tmp_path):
    one_sentence(run_cli("select", str(answers["a"]), *_model(server, tmp_path)), "a.md", "no candidate",
                 "select TASK CANDIDATE", "--task")
    one_sentence(run_cli("select", str(answers["a"]), "--dry-run", *_model(server, tmp_path)), "no candidate")


def test_a_select_job_says_which_file_it_took_as_the_task(answers, tmp_path):
    from tests.support.dashboard import dashboard
    from tests.support.scripted_model import ScriptedScoreModel

    paths = [str(answers[n]) for n in "abc"]
    with dashboard(tmp_path / "j.sqlite3", ScriptedScoreModel(), roots=(tmp_path,)) as d, d.client() as c:
        job = d.wait(d.submit("select", {"paths": paths, "criteria": "general"})["id"])
        assert job["status"] == "done", job
        assert c.get(f"/api/jobs/{job['id']}/result").json()["result"]["task_taken_from"] == paths[0]
        alone = d.wait(d.submit("select", {"paths": paths[:1], "criteria": "general"})["id"])
        assert alone["status"] == "failed" and "no candidate" in alone["error"], alone
