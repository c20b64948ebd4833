"""The REST API of ``veriscale serve`` through a real HTTP client against the real server.

Verdict logic runs on the scripted test doubles (named as such); the security checks, jobs,
the store and the event stream are the real ones.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.support.dashboard import dashboard
from tests.support.scripted_model import ScriptedScoreModel
from tests.support.scripted_progress import ScriptedProgressModel
from veriscale.server.security import AccessPolicy

TASK = "Write a function that returns the sum of a list of numbers."


@pytest.fixture()
def pool(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "task.md").write_text(TASK)
    (folder / "a.md").write_text("def total(xs): return 0  # wrong")
    (folder / "b.md").write_text("GOOD def total(xs): return sum(xs)")
    (folder / "c.md").write_text("def total(xs): return max(xs)")
    return folder


def _paths(pool: Path) -> list[str]:
    return [str(pool / n) for n in ("task.md", "a.md", "b.md", "c.md")]


def test_a_select_job_runs_on_the_gateway_and_its_judgements_open_to_their_calls(tmp_path, pool):
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel(), roots=(tmp_path,)) as d, d.client() as c:
        job = d.submit("select", {"paths": _paths(pool), "criteria": "general"})
        assert job["status"] == "queued"
        done = d.wait(job["id"])
        assert done["status"] == "done", done
        result = c.get(f"/api/jobs/{job['id']}/result").json()
        assert result["result"]["best"]["id"] == "b"
        run = c.get(f"/api/runs/{done['run_id']}").json()
        assert run["command"] == "select" and run["job"] == job["id"] and run["view"] == "selection"
        sel = c.get(f"/api/runs/{done['run_id']}/selection").json()
        ids = [cand["id"] for cand in sel["candidates"]]
        b = ids.index("b")
        assert sel["best"] == b and len(sel["matrix"]) == 3
        assert all(sel["matrix"][b][j] > 0.5 for j in range(3) if j != b and sel["matrix"][b][j] is not None)
        judgement = next(j for j in sel["judgements"] if b in (j["i"], j["j"]))
        assert judgement["calls"], "each judgement names the calls behind it"
        call = c.get(f"/api/calls/{judgement['calls'][0]}").json()
        prompt = "\n".join(m["content"] for m in call["messages"])
        assert "return sum(xs)" in prompt and TASK in prompt
        assert set(call["label_probs"]) == set(call["labels"]) and call["label_mass"] == pytest.approx(0.9)
        assert c.get("/api/calls/" + "0" * 64).status_code == 404
        linked = c.get(f"/api/runs/{done['run_id']}/calls").json()["calls"]
        assert {k for j in sel["judgements"] for k in j["calls"]} <= {call["key"] for call in linked}


def test_score_and_compare_jobs_record_their_verdicts(tmp_path):
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel()) as d, d.client() as c:
        s = d.wait(d.submit("score", {"task": TASK, "candidate": "GOOD sum(xs)"})["id"])
        bad = d.wait(d.submit("score", {"task": TASK, "candidate": "max(xs)"})["id"])
        cmp = d.wait(d.submit("compare", {"task": TASK, "a": "max(xs)", "b": "GOOD sum(xs)"})["id"])
        reward = c.get(f"/api/jobs/{s['id']}/result").json()["result"]["reward"]
        assert reward > c.get(f"/api/jobs/{bad['id']}/result").json()["result"]["reward"]
        assert c.get(f"/api/jobs/{cmp['id']}/result").json()["result"]["p_a_wins"] < 0.5
        runs = c.get("/api/runs", params={"command": "score"}).json()
        assert runs["total"] == 2 and {r["job"] for r in runs["runs"]} == {s["id"], bad["id"]}


def _trajectory(path: Path, words: list[str]) -> Path:
    """One run as an OpenAI-messages JSONL line: the task, then one assistant step a word."""
    messages = [{"role": "user", "content": TASK}] + [{"role": "assistant", "content": w} for w in words]
    path.write_text(json.dumps({"id": "t1", "messages": messages}) + "\n")
    return path


def test_a_track_job_streams_its_points_and_the_progress_view_has_the_curve(tmp_path):
    traj = _trajectory(tmp_path / "t1.jsonl", ["UP", "nothing", "UP", "DOWN", "UP", "UP"])
    with dashboard(tmp_path / "s.sqlite3", ScriptedProgressModel(), roots=(tmp_path,)) as d, d.client() as c:
        job = d.wait(d.submit("track", {"paths": [str(traj)]})["id"])
        assert job["status"] == "done", job
        with c.stream("GET", f"/api/runs/{job['run_id']}/stream") as stream:
            text = "".join(stream.iter_text())
        points = [json.loads(block.split("data: ", 1)[1]) for block in text.split("\n\n") if "event: point" in block]
        assert [p["point"]["step"] for p in points] == [1, 2, 3, 4, 5, 6]
        assert text.rstrip().endswith('"status": "ok"}') and "event: end" in text
        view = c.get(f"/api/runs/{job['run_id']}/progress").json()
        values = [p["value"] for p in view["curves"][0]["points"]]
        assert values[0] == pytest.approx(0.25, abs=0.07) and values[-1] > values[3]
        steps = c.get(f"/api/runs/{job['run_id']}/steps", params={"trajectory": "t1", "offset": 2, "limit": 2}).json()
        assert steps["total"] == 6 and [s["text"] for s in steps["steps"]] == ["UP", "DOWN"]
        assert c.get(f"/api/runs/{job['run_id']}/steps/find",
                     params={"trajectory": "t1", "q": "down"}).json()["matches"] == [3]


GUARD_S = 60  # hang guard only: a held call the test never let go


class HeldProgressModel(ScriptedProgressModel):
    """TEST DOUBLE — the scripted progress judge that answers ``free`` calls, then holds each later
    one until the test sets ``release``."""

    def __init__(self, free: int) -> None:
        super().__init__()
        self.free = free
        self.release = threading.Event()
        self.lock = threading.Lock()

    def score(self, request):
        with self.lock:
            self.free -= 1
            held = self.free < 0
        if held:
            assert self.release.wait(GUARD_S), "the test never released the held progress call"
        return super().score(request)


def test_a_track_jobs_points_reach_the_stream_while_it_runs(tmp_path):
    traj = _trajectory(tmp_path / "t1.jsonl", ["UP"] * 10)
    model = HeldProgressModel(free=3)  # three steps scored, the other seven held until the test says
    with dashboard(tmp_path / "s.sqlite3", model, roots=(tmp_path,)) as d, d.client() as c:
        try:
            job = d.submit("track", {"paths": [str(traj)]})
            deadline = time.monotonic() + GUARD_S
            while (run_id := c.get(f"/api/jobs/{job['id']}").json()["run_id"]) is None:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            with c.stream("GET", f"/api/runs/{run_id}/stream") as stream:
                for chunk in stream.iter_text():
                    if "event: point" in chunk:
                        break
                else:
                    raise AssertionError("the stream ended with no point while later steps were held")
            so_far = c.get(f"/api/runs/{run_id}/progress").json()["curves"][0]["points"]
            assert 1 <= len(so_far) <= 3, "the first points came while the later ones were still being scored"
            assert c.get(f"/api/jobs/{job['id']}").json()["status"] == "running"
        finally:
            model.release.set()
        assert d.wait(job["id"])["status"] == "done"
        assert len(c.get(f"/api/runs/{run_id}/progress").json()["curves"][0]["points"]) == 10


def test_the_stream_resumes_after_the_last_event_id_it_was_given(tmp_path):
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel()) as d, d.client() as c:
        from veriscale.engine.run_log import RunLog

        run = d.store.start_run("track --follow", "m", {})
        log = RunLog(d.store)
        ids = [log.emit(run, "point", {"trajectory": "t", "point": {"step": k, "value": 0.1 * k}}) for k in (1, 2, 3)]

        def steps_in(text: str) -> list[int]:
            blocks = text.split("\n\n")[:-1]  # whole events only
            return [json.loads(b.split("data: ", 1)[1])["point"]["step"] for b in blocks if "event: point" in b]

        text, written = "", False
        with c.stream("GET", f"/api/runs/{run}/stream", headers={"last-event-id": str(ids[1])}) as stream:
            for chunk in stream.iter_text():
                text += chunk
                if not written and steps_in(text):  # the stream is open and caught up: write one more, then end
                    written = True
                    log.emit(run, "point", {"trajectory": "t", "point": {"step": 4, "value": 0.4}})
                    d.store.finish_run(run, "ok", {"curves": []})
        assert written, text
        assert steps_in(text) == [3, 4], "after event 2 come 3, then the one written while the stream was open"


class HeldScoreModel(ScriptedScoreModel):
    """TEST DOUBLE — the scripted scorer whose calls wait while ``gate`` is clear (``entered`` is set
    once one does), so a job can be caught running, mid-call."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()

    def score(self, request):
        if not self.gate.is_set():
            self.entered.set()
            assert self.gate.wait(GUARD_S), "the test never opened the gate"
        return super().score(request)


def test_cancel_stops_a_queued_job_at_once_and_a_running_one_between_calls(tmp_path, pool):
    model = HeldScoreModel()
    with dashboard(tmp_path / "s.sqlite3", model, roots=(tmp_path,)) as d, d.client() as c:
        model.gate.clear()  # the running job's calls wait here until it was asked to cancel
        try:
            running = d.submit("select", {"paths": _paths(pool), "method": "round_robin"})
            queued = d.submit("score", {"task": TASK, "candidate": "x"})
            assert model.entered.wait(GUARD_S), "the select job never called the model"
            assert c.get(f"/api/jobs/{running['id']}").json()["status"] == "running"
            assert c.get(f"/api/jobs/{running['id']}/result").status_code == 409
            assert c.post(f"/api/jobs/{queued['id']}/cancel").json()["status"] == "cancelled"
            c.post(f"/api/jobs/{running['id']}/cancel")
        finally:
            model.gate.set()  # the calls in flight return; the job stops before its next ones
        job = d.wait(running["id"])
        assert job["status"] == "cancelled"
        assert c.get(f"/api/runs/{job['run_id']}").json()["status"] == "cancelled"
        assert d.wait(queued["id"])["status"] == "cancelled"
        assert d.store.count_calls() < 36, "a cancelled round robin stops well before its 36+ calls"
        assert c.post("/api/jobs/999/cancel").status_code == 404


def test_a_job_may_name_only_files_under_the_allowed_folders(tmp_path, pool):
    outside = tmp_path.parent / f"{tmp_path.name}-outside.md"
    outside.write_text("secret")
    (pool / "sneaky.md").symlink_to(outside)
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel(), roots=(pool,)) as d, d.client() as c:
        for paths in ([str(outside)], [str(pool / ".." / outside.name)], [str(pool / "sneaky.md")], [str(pool)]):
            r = c.post("/api/jobs", json={"kind": "select", "params": {"paths": paths}})
            assert r.status_code == 400, paths
            assert "outside the folders this server may read" in r.json()["error"] or "holds a link" in r.json()["error"]
        r = c.post("/api/jobs", json={"kind": "select", "params": {"paths": [str(pool / "a.md")], "criteria": str(outside)}})
        assert r.status_code == 400
        assert c.get("/api/jobs").json()["jobs"] == [], "nothing refused was queued"
    outside.unlink()


def test_a_refusal_names_only_the_clients_own_path_and_the_reason(tmp_path, pool):
    secret_dir = tmp_path.parent / f"{tmp_path.name}-private"
    secret_dir.mkdir()
    (secret_dir / "keys.md").write_text("secret")
    (pool / "innocent.md").symlink_to(secret_dir / "keys.md")
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel(), roots=(pool,)) as d, d.client() as c:
        for given in (str(pool / "innocent.md"), "/etc/passwd", "/"):
            r = c.post("/api/jobs", json={"kind": "select", "params": {"paths": [given]}})
            error = r.json()["error"]
            assert r.status_code == 400 and f"'{given}' is outside the folders this server may read" in error
            assert str(secret_dir) not in error, "the link's target is not the client's to learn"
            assert "--allow-dir" not in error and str(pool) not in error.replace(given, ""), error
            assert "\n" not in error
    (pool / "innocent.md").unlink()


def test_bad_job_bodies_get_one_sentence(tmp_path):
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel()) as d, d.client() as c:
        r = c.post("/api/jobs", json={"kind": "select", "params": {}})
        assert r.status_code == 422 and "'params.paths'" in r.json()["error"] and "\n" not in r.json()["error"]
        assert c.post("/api/jobs", json={"kind": "nope", "params": {}}).status_code == 422
        assert c.post("/api/jobs", json={"kind": "score", "params": {"task": "t", "candidate": "c", "model": "http://x"}}
                      ).status_code == 422, "a job cannot point the server at another model"
        assert c.get("/api/runs/424242").json() == {"error": "there is no run 424242 in the store: pick one from the runs list"}


def test_static_files_cannot_be_reached_outside_the_dashboard_assets(tmp_path):
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel()) as d, d.client() as c:
        for path in ("/static/../../../../etc/passwd", "/static/%2e%2e/%2e%2e/app.py", "/static/..%2fapp.py",
                     "/static//etc/passwd"):
            r = c.get(path)
            assert "root:" not in r.text and "create_app" not in r.text, path
        assert c.get("/static/index.html").status_code == 200


def test_requests_from_other_sites_or_names_are_refused(tmp_path):
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel()) as d, d.client() as c:
        body = {"kind": "score", "params": {"task": "t", "candidate": "c"}}
        assert c.get("/api/runs", headers={"host": "attacker.example"}).status_code == 421  # DNS rebinding
        assert c.post("/api/jobs", json=body, headers={"origin": "http://attacker.example"}).status_code == 403
        assert c.post("/api/jobs", json=body, headers={"sec-fetch-site": "cross-site"}).status_code == 403
        form = c.post("/api/jobs", content=b"kind=score", headers={"content-type": "application/x-www-form-urlencoded"})
        assert form.status_code == 415
        assert c.post("/api/jobs", json=body, headers={"origin": d.url}).status_code == 201  # the dashboard itself
        page = c.get("/")
        assert page.headers["content-security-policy"].startswith("default-src 'self'")
        assert c.get("/api/runs").headers["x-content-type-options"] == "nosniff"


def test_oversized_bodies_get_413_whether_declared_or_streamed(tmp_path):
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel()) as d, d.client() as c:
        big = json.dumps({"kind": "score", "params": {"task": "t", "candidate": "x" * (2 << 20)}}).encode()
        assert c.post("/api/jobs", content=big, headers={"content-type": "application/json"}).status_code == 413

        def chunks():
            for _ in range(40):
                yield b"x" * 65536

        r = c.post("/api/jobs", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413 and "over" in r.json()["error"]


def test_with_a_token_every_route_but_health_needs_it(tmp_path):
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel(), token="s3cret") as d:
        with httpx.Client(base_url=d.url) as anon:
            assert anon.get("/api/health").status_code == 200
            for path in ("/", "/api/runs", "/api/info", "/static/index.html", "/openapi.json"):
                assert anon.get(path).status_code == 401, path
            assert anon.get("/api/runs", headers={"authorization": "Bearer wrong"}).status_code == 401
            assert anon.get("/api/runs", headers={"authorization": "Bearer s3cret"}).status_code == 200
            assert anon.get("/api/runs", headers={"x-api-key": "s3cret"}).status_code == 200
            assert anon.get("/", params={"token": "wrong"}).status_code == 401
            login = anon.get("/", params={"token": "s3cret"}, follow_redirects=False)
            assert login.status_code == 303 and "httponly" in login.headers["set-cookie"].lower()
            assert anon.get("/api/runs").status_code == 200, "the cookie from the login now works"


def test_off_loopback_a_token_is_required_and_any_host_name_is_accepted_with_it():
    with pytest.raises(ValueError):
        AccessPolicy.for_bind("0.0.0.0", 8765, token=None)
    policy = AccessPolicy.for_bind("0.0.0.0", 8765, token="t")
    assert policy.any_host and policy.token_ok({"authorization": "Bearer t"}, {})
    assert not policy.token_ok({}, {}) and not policy.token_ok({"x-api-key": "x"}, {})


def test_the_openapi_schema_is_published_and_no_page_loads_from_a_cdn(tmp_path):
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel()) as d, d.client() as c:
        schema = c.get("/openapi.json").json()
        assert {"/api/jobs", "/api/runs", "/api/runs/{run_id}/stream", "/api/calls/{key}"} <= set(schema["paths"])
        kinds = json.dumps(schema["components"]["schemas"])
        for kind in ("SelectParams", "TrackParams", "ScoreParams", "CompareParams", "HarnessParams"):
            assert kind in kinds
        assert c.get("/docs").status_code == 404, "FastAPI's docs page pulls Swagger UI from a CDN"


def test_runs_are_paged_and_searched_by_the_server(tmp_path):
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel()) as d, d.client() as c:
        for k in range(120):
            rid = d.store.start_run("select" if k % 2 else "track", "m", {"paths": [f"/data/run-{k}.jsonl"]})
            d.store.finish_run(rid, "ok", {})
        page = c.get("/api/runs", params={"limit": 50, "offset": 50}).json()
        assert page["total"] == 120 and len(page["runs"]) == 50 and page["runs"][0]["id"] == 70
        found = c.get("/api/runs", params={"q": "run-7", "command": "select"}).json()
        assert {r["id"] for r in found["runs"]} == {8, 72, 74, 76, 78, 80}
        assert c.get("/api/runs", params={"q": "100%"}).json()["total"] == 0, "% is matched literally"
        assert c.get("/api/runs", params={"limit": 5000}).status_code == 422


def test_serve_refuses_to_bind_off_loopback_without_a_token_and_checks_allow_dirs(tmp_path):
    from typer.testing import CliRunner

    from veriscale.cli import app

    env = {k: v for k, v in os.environ.items() if k != "VERISCALE_TOKEN"}
    r = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--store", str(tmp_path / "s.sqlite3")], env=env)
    assert r.exit_code == 2 and "--token" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(app, ["serve", "--allow-dir", str(tmp_path / "missing"), "--store", str(tmp_path / "s.sqlite3")])
    assert r.exit_code == 2 and "is not a folder" in r.output


def test_a_harness_job_runs_jailed_and_its_page_reads_the_run_folder(tmp_path):
    from tests.server.test_harness_view import FIXTURE, scripted_sessions
    from veriscale.harness.workspace.materialize import materialize

    task = tmp_path / "tasks" / "quarterly_report"
    materialize(FIXTURE, task, seed=11)
    chat = scripted_sessions()
    with dashboard(tmp_path / "s.sqlite3", chat, roots=(tmp_path / "tasks",)) as d, d.client() as c:
        job = d.wait(d.submit("harness", {"tasks": [str(task)], "max_steps": 8})["id"], seconds=600)
        assert job["status"] == "done", job
        result = c.get(f"/api/jobs/{job['id']}/result").json()["result"]
        assert result["jail"] == "on" and result["tasks"][0]["outcome"] == "delivered"
        view = c.get(f"/api/runs/{job['run_id']}/harness").json()
        (entry,) = view["tasks"]
        assert entry["readable"] and entry["claims"]["disputed"] and entry["adjudication"]["base"] == "r01"
        diff = next(f for f in entry["diffs"] if f["path"].endswith("report.md"))
        assert "+Active customers: 1,310" in diff["diff"]
        assert c.post(f"/api/jobs/{job['id']}/cancel").json()["status"] == "done", "a finished job stays as it was"
