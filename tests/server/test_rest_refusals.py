"""What the REST API refuses, and how: through httpx against the real ``veriscale serve`` app.

A job with params it could never run (an unknown criteria set, scale, method, contract or
executor, a misspelt field) is refused when it is submitted, 422 with one sentence naming the
field and the fix, and nothing is queued. A body that is not a JSON object, and an unknown route,
get one sentence in the documented ``{"error"}`` shape. A harness job whose run failed reads
``failed``. Verdicts would come from the scripted test double; none is needed here.
"""

from __future__ import annotations


import pytest

from tests.support.dashboard import dashboard
from tests.support.scripted_model import ScriptedScoreModel

SCORE = {"task": "Print the number of lines in notes.txt.", "candidate": "wc -l < notes.txt"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("rest-refusals")
    (root / "a.md").write_text("answer a")
    (root / "bad-criteria.md").write_text("no criterion headings in this file at all\n")
    with dashboard(root / "s.sqlite3", ScriptedScoreModel(), roots=(root,)) as d, d.client() as c:
        yield root, d, c


def _post(client, body: bytes):
    return client.post("/api/jobs", content=body, headers={"content-type": "application/json"})


@pytest.mark.parametrize("kind, params, field, fix", [
    ("score", {**SCORE, "criteria": "generall"}, "'params.criteria'", "neither a built-in set (general, terminal, swe, web, medical, office, robot, math, agent)"),
    ("score", {**SCORE, "scale": "stars"}, "'params.scale'", "use one of letters"),
    ("compare", {"task": "t", "a": "x", "b": "y", "scale": "letters:99"}, "'params.scale'", "choose G between 2 and 26"),
    ("select", {"paths": ["a.md"], "method": "tournament"}, "'params.method'", "use one of ppt, round_robin, knockout, pointwise"),
    ("select", {"paths": ["a.md"], "budget": "dollars=3"}, "'params.budget'", "calls=N"),
    ("harness", {"tasks": ["a.md"], "contract": "whatever"}, "'params.contract'", "use one of pick-only, artifact"),
    ("harness", {"tasks": ["a.md"], "executor": "bash"}, "'params.executor'", "use one of builtin, pi"),
    ("score", {**SCORE, "candidat": "typo"}, "'params.candidat' is not a field", "task, candidate, criteria, scale"),
], ids=["criteria", "scale", "scale-size", "method", "budget", "contract", "executor", "params-field"])
def test_params_a_job_could_never_run_are_refused_at_submit_naming_the_field(served, kind, params, field, fix) -> None:
    root, d, c = served
    params = {k: ([str(root / p) for p in v] if k in ("paths", "tasks") else v) for k, v in params.items()}
    before = len(c.get("/api/jobs").json()["jobs"])
    r = c.post("/api/jobs", json={"kind": kind, "params": params})
    assert r.status_code == 422, r.text
    sentence = r.json()["error"]
    assert sentence.startswith(f"a {kind} job's {field}") and fix in sentence, sentence
    assert "\n" not in sentence and "Value error" not in sentence
    assert len(c.get("/api/jobs").json()["jobs"]) == before, "a refused job was queued"


def test_a_criteria_file_that_does_not_parse_is_refused_at_submit(served) -> None:
    root, _d, c = served
    r = c.post("/api/jobs", json={"kind": "score", "params": {**SCORE, "criteria": str(root / "bad-criteria.md")}})
    assert r.status_code == 422, r.text
    assert r.json()["error"].startswith("a score job's 'params.criteria': "), r.text


def test_an_unknown_top_level_field_and_an_unknown_kind_are_refused(served) -> None:
    _root, _d, c = served
    r = c.post("/api/jobs", json={"kind": "score", "params": SCORE, "priority": "high"})
    assert r.status_code == 422 and r.json()["error"] == (
        "a score job's 'priority' is not a field this API takes: drop it or fix its name (kind, params)"), r.text
    r = c.post("/api/jobs", json={"kind": "rank", "params": {}})
    assert r.status_code == 422 and r.json()["error"] == (
        "'kind': unknown job kind 'rank': use one of score, compare, select, select_many, track, harness"), r.text


@pytest.mark.parametrize("body, start", [
    (b"kind=score&task=x", "the request body is not valid JSON: send a JSON object"),
    (b'{"kind": "score", ', "the request body is not valid JSON: send a JSON object"),
    (b'[{"kind": "score"}]', "the request body is JSON but not an object"),
    (b"", "the request has no body"),
], ids=["form", "cut", "list", "empty"])
def test_a_body_that_is_not_a_json_object_gets_one_sentence(served, body, start) -> None:
    r = _post(served[2], body)
    assert r.status_code == 422 and r.json()["error"].startswith(start), r.text
    assert "/openapi.json" in r.json()["error"]


@pytest.mark.parametrize("method, path, status", [
    ("GET", "/api/nope", 404), ("GET", "/nothing/here", 404), ("POST", "/api/jobs/1/restart", 404),
    ("GET", "/static/js/missing.js", 404), ("DELETE", "/api/runs", 405),
])
def test_unknown_routes_answer_in_the_documented_error_shape(served, method, path, status) -> None:
    r = served[2].request(method, path, headers={"content-type": "application/json"})
    assert r.status_code == status and set(r.json()) == {"error"}, r.text
    assert isinstance(r.json()["error"], str) and "/openapi.json" in r.json()["error"]


def test_a_harness_job_whose_run_failed_reads_failed(served) -> None:
    root, d, c = served
    empty = root / "not-a-task"
    empty.mkdir()  # no task.json: the task fails, so the harness run fails
    job = d.wait(d.submit("harness", {"tasks": [str(empty)], "max_steps": 2})["id"], seconds=300)
    assert job["run_id"] is not None, job
    run = c.get(f"/api/runs/{job['run_id']}").json()
    assert run["command"] == "harness run" and run["status"] == "failed", run
    assert job["status"] == "failed", job
    assert job["error"].startswith("1 of 1 task(s) failed: not-a-task: "), job
    result = c.get(f"/api/jobs/{job['id']}/result").json()
    assert result["status"] == "failed" and result["result"]["failed"] == 1


def test_a_score_job_whose_calls_failed_reads_failed_with_the_reason(tmp_path) -> None:
    model = ScriptedScoreModel()
    model.fail_when = lambda request: True  # every verifier call fails: the run has no verdict
    with dashboard(tmp_path / "s.sqlite3", model) as d, d.client() as c:
        job = d.wait(d.submit("score", SCORE)["id"])
        assert c.get(f"/api/runs/{job['run_id']}").json()["status"] == "failed"
        assert job["status"] == "failed", job
        assert job["error"].startswith("the run failed: ") and "scripted failure" in job["error"], job
