"""Secrets in the REST API and the dashboard of ``veriscale serve``: every route the dashboard
reads, and the run's event stream, answer with each secret shape redacted; the opt-out and user
patterns reach them; the store keeps the raw text. The app is the real one, through FastAPI's
TestClient (the dashboard's pages are static and render these answers as text)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.support.scripted_model import ScriptedScoreModel
from tests.support.secrets import PLANTED
from tests.test_redact import CUSTOM, assert_redacted, planted_store
from veriscale.config import load_config
from veriscale.redact import Redactor
from veriscale.server.app import STATIC_DIR, create_app
from veriscale.server.jobs import JobRunner
from veriscale.server.security import AccessPolicy
from veriscale.server.settings import server_settings


def _client(tmp_path: Path, redactor: Redactor | None = None):
    st, rid, key = planted_store(tmp_path / "s.sqlite3")
    runner = JobRunner(st, ScriptedScoreModel())
    kwargs = {} if redactor is None else {"redactor": redactor}
    app = create_app(st, runner, AccessPolicy.for_bind("127.0.0.1", 8765, token=None), **kwargs)
    return TestClient(app, base_url="http://127.0.0.1:8765"), st, rid, key


def _dashboard_reads(c: TestClient, rid: int, key: str) -> dict[str, str]:
    """The answer of every GET route the dashboard's api.js calls for one run (the harness page
    answers 404 for a run that is not a harness run, so it is not here)."""
    routes = {
        "runs": "/api/runs", "run": f"/api/runs/{rid}", "progress": f"/api/runs/{rid}/progress",
        "steps": f"/api/runs/{rid}/steps?trajectory=t", "calls": f"/api/runs/{rid}/calls",
        "call": f"/api/calls/{key}", "stream": f"/api/runs/{rid}/stream",
    }
    answers = {}
    for name, route in routes.items():
        r = c.get(route)
        assert r.status_code == 200, (route, r.text)
        answers[name] = r.text
    return answers


def test_the_dashboard_routes_and_the_event_stream_redact_every_shape(tmp_path):
    c, st, rid, key = _client(tmp_path)
    with c:
        page = c.get("/")
        assert page.status_code == 200 and "<html" in page.text.lower()
        answers = _dashboard_reads(c, rid, key)
        for name in ("run", "call", "stream"):  # args + result; the exact prompt and reply; live events
            assert_redacted(answers[name])
        assert "[redacted:openai-key]" in answers["steps"] and PLANTED not in answers["steps"]
        everything = "\n".join(answers.values())
        assert_redacted(everything)
        call = c.get(f"/api/calls/{key}").json()
        assert call["messages"][0]["content"].startswith("export OPENAI_API_KEY=[redacted:openai-key]; run\n")
    assert st.call(key)["request"]["messages"][0]["content"] == PLANTED  # the store keeps the raw text


def test_every_data_route_of_the_dashboard_is_covered():
    """The routes api.js reads: a new one must join _dashboard_reads (or be said to hold no run data)."""
    source = (STATIC_DIR / "js" / "api.js").read_text(encoding="utf-8")
    used = {re.sub(r"\$\{[^}]*\}", "X", m) for m in re.findall(r'[`"](/api/[^`"?]*)', source)}
    covered = {"/api/runs", "/api/runs/X", "/api/runs/X/progress", "/api/runs/X/steps", "/api/calls/X",
               "/api/runs/X/stream"}
    elsewhere = {"/api/info", "/api/jobs", "/api/jobs/X/cancel",  # no store text, or jobs: tested below
                 "/api/runs/X/steps/find",  # tested below
                 "/api/runs/X/selection", "/api/runs/X/harness"}  # need a run of their kind; same response class
    assert used - covered - elsewhere == set(), "a dashboard route not checked for secrets"


def test_a_job_and_its_result_are_redacted(tmp_path):
    c, _st, _rid, _key = _client(tmp_path)
    with c:
        job = c.post("/api/jobs", json={"kind": "score", "params": {"task": PLANTED, "candidate": "GOOD x"}})
        assert job.status_code == 201, job.text
        listed = c.get("/api/jobs").text
        assert_redacted(job.text)
        assert_redacted(listed)


def test_a_search_matches_only_what_may_be_shown(tmp_path):
    """Searching for a secret's first characters must not tell that a run or a step holds it."""
    c, _st, rid, _key = _client(tmp_path)
    with c:
        prefix = "sk-proj-A1b2C3"
        assert c.get("/api/runs", params={"q": prefix}).json()["total"] == 0
        assert c.get(f"/api/runs/{rid}/steps/find", params={"trajectory": "t", "q": prefix}).json()["matches"] == []
        assert c.get("/api/runs", params={"q": "OPENAI_API_KEY"}).json()["total"] == 1  # what is shown still matches
        assert c.get(f"/api/runs/{rid}/steps/find", params={"trajectory": "t", "q": "cookie session"}).json()["matches"] == [0]
    raw, _st, rid, _key = _client(tmp_path / "raw", Redactor(enabled=False))
    with raw:
        assert raw.get("/api/runs", params={"q": prefix}).json()["total"] == 1


def test_no_redact_and_user_patterns_reach_the_server_through_its_settings(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[redact]\npatterns = ["ACME-INTERNAL-\\\\d+-[A-Z]+"]\n')
    from veriscale.cli.settings import resolve

    on = server_settings(load_config(cfg), redactor=resolve(load_config(cfg), environ={}).redactor())
    c, _st, rid, key = _client(tmp_path / "on", on.redactor)
    with c:
        assert_redacted("\n".join(_dashboard_reads(c, rid, key).values()), custom=True)
    off = Redactor.build(enabled=False)
    raw, _st, rid, key = _client(tmp_path / "off", off)
    with raw:
        assert raw.get(f"/api/runs/{rid}").json()["args"]["task"] == PLANTED
        assert CUSTOM in raw.get(f"/api/runs/{rid}/steps?trajectory=t").text


@pytest.mark.parametrize("pattern", ["(unclosed", ""])
def test_a_bad_server_pattern_is_one_sentence(tmp_path, pattern):
    from veriscale.cli.settings import resolve
    from veriscale.config import Config
    from veriscale.errors import UserError

    with pytest.raises(UserError, match="redact"):
        resolve(Config(values={"redact.patterns": [pattern]}), environ={}).redactor()
