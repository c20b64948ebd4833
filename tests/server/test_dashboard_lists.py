"""The dashboard's lists and live page in a real headless Chromium against the real server.

The runs list's score and cost columns, sorted and filtered by the server; the score and compare
forms submitting real jobs; every attempt and run of a resumed job; the live page's header
counters growing with the curve, and a curve's point opening its step. Verdicts come from the
scripted test double (named as such) or from runs written straight into the store.
"""

from __future__ import annotations

from pathlib import Path

import httpx
from playwright.sync_api import expect

from tests.server.test_dashboard_browser import READY, _follow, _open, browser, page  # noqa: F401  (fixtures)
from tests.support.dashboard import dashboard
from tests.support.scripted_model import ScriptedScoreModel
from veriscale.data.model import Step
from veriscale.engine.run_log import RunLog
from veriscale.engine.store import Store
from veriscale.server.jobs import JobTable

CALL = dict(model="scripted:test-double", fingerprint="f", prompt_version="p", request={}, status="ok",
            response={"label_probs": {}})


def _run(store, command: str, result: dict, *, tokens: int = 0, status: str = "ok") -> int:
    """A finished run whose one call cost ``tokens`` (prompt + completion)."""
    run_id = store.start_run(command, "scripted:test-double", {})
    if tokens:
        store.put_call(f"call-{run_id}", prompt_tokens=tokens - 1, completion_tokens=1, **CALL)
        store.link_call(run_id, f"call-{run_id}", cache_hit=False)
    store.finish_run(run_id, status, result)
    return run_id


def _ids(url: str, query: str) -> list[int]:
    return [r["id"] for r in httpx.get(f"{url}/api/runs?{query}").json()["runs"]]


def test_the_runs_list_shows_score_and_cost_and_the_server_sorts_and_filters_by_them(tmp_path: Path, page) -> None:  # noqa: F811
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel()) as d:
        low = _run(d.store, "score", {"reward": 0.2}, tokens=100)
        high = _run(d.store, "score", {"reward": 0.9}, tokens=5000)
        pair = _run(d.store, "compare", {"p_a_wins": 0.6}, tokens=300)
        pick = _run(d.store, "select", {"confidence": 0.95, "ranking": []}, tokens=2000)
        curve = _run(d.store, "track", {"curves": [{"points": [{"step": 1, "value": 0.1}, {"step": 4, "value": 0.5}]},
                                                   {"points": [{"step": 2, "value": 0.3}]}]})
        failed = _run(d.store, "score", {"reward": None, "errors": ["Output: refused"]}, tokens=50, status="failed")
        # the REST API: sorted by score (runs without one last), by cost, and kept to ranges
        assert _ids(d.url, "sort=score") == [pick, high, pair, curve, low, failed]
        assert _ids(d.url, "sort=score&order=asc") == [low, curve, pair, high, pick, failed]
        assert _ids(d.url, "sort=cost") == [high, pick, pair, low, failed, curve]
        assert _ids(d.url, "min_score=0.5&max_score=0.92") == [pair, high]
        assert _ids(d.url, "command=score&min_cost=60&max_cost=5000") == [high, low]
        assert _ids(d.url, "status=failed&sort=cost") == [failed]
        listed = {r["id"]: r for r in httpx.get(f"{d.url}/api/runs").json()["runs"]}
        assert (listed[curve]["score"], listed[curve]["score_label"]) == (0.4, "progress")
        assert listed[high]["cost"]["tokens"] == 5000 and listed[failed]["score"] is None
        r = httpx.get(f"{d.url}/api/runs?sort=money")
        assert r.status_code == 422 and r.json()["error"].startswith("'query.sort': input should be 'id', 'score' or 'cost'")

        # the page: the columns, then the same sorts and filters from its toolbar
        _open(page, d.url + "/#/runs")
        rows = page.get_by_test_id("run-row")
        expect(rows).to_have_count(6)
        expect(page.locator(f"[data-run-id='{high}'] [data-testid=run-score]")).to_have_text("0.900 reward")
        expect(page.locator(f"[data-run-id='{pair}'] [data-testid=run-score]")).to_have_text("0.600 P(A beats B)")
        expect(page.locator(f"[data-run-id='{pick}'] [data-testid=run-score]")).to_have_text("0.950 confidence")
        expect(page.locator(f"[data-run-id='{failed}'] [data-testid=run-score]")).to_have_text("—")
        expect(page.locator(f"[data-run-id='{high}'] [data-testid=run-cost]")).to_have_attribute("data-tokens", "5000")

        def order() -> list[int]:
            return [int(r.get_attribute("data-run-id")) for r in rows.all()]

        page.get_by_test_id("runs-sort").select_option(label="highest score")
        expect(rows.first).to_have_attribute("data-run-id", str(pick))
        assert order() == [pick, high, pair, curve, low, failed]
        page.get_by_test_id("runs-sort").select_option(label="most tokens")
        expect(rows.first).to_have_attribute("data-run-id", str(high))
        assert order() == [high, pick, pair, low, failed, curve]
        page.get_by_test_id("runs-min-score").fill("0.5")
        expect(rows).to_have_count(3)
        assert order() == [high, pick, pair]
        page.get_by_test_id("runs-max-cost").fill("2500")
        expect(rows).to_have_count(2)
        assert order() == [pick, pair]
        page.get_by_label("command").select_option("compare")
        expect(rows).to_have_count(1)
        expect(rows.first).to_have_attribute("data-run-id", str(pair))
        page.get_by_label("command").select_option("")
        page.get_by_test_id("runs-min-score").fill("")
        page.get_by_test_id("runs-max-cost").fill("")
        page.get_by_label("status").select_option("failed")
        expect(rows).to_have_count(1)
        expect(rows.first).to_have_attribute("data-run-id", str(failed))
        expect(page.get_by_test_id("runs-total")).to_have_text("1 run")


def test_the_runs_table_fits_a_1280_px_window_with_long_summaries_models_and_costs(tmp_path: Path, page) -> None:  # noqa: F811
    """Nothing is cut at the window's edge: the summary, the model and the cost wrap inside the table."""
    model = "http://127.0.0.1:8001/v1?timeout=1800&template=chatml#HuggingFaceTB/SmolLM2-135M-Instruct"
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel()) as d:
        long_pick = "merge-diff-arc-agi-task__" + "mSdX5Nk" * 4
        pick = d.store.start_run("select", model, {})
        d.store.put_call("c-pick", prompt_tokens=143_447, completion_tokens=1, **CALL)
        d.store.link_call(pick, "c-pick", cache_hit=False)
        d.store.finish_run(pick, "ok", {"confidence": 0.36, "pick": long_pick, "ranking": []})
        harness = d.store.start_run("harness run", model, {})
        d.store.finish_run(harness, "failed", {"error": "the upstream at " + model + " closed the connection " * 6})
        _open(page, d.url + "/#/runs")
        expect(page.get_by_test_id("run-row")).to_have_count(2)
        wrap = page.locator(".table-wrap")
        assert wrap.evaluate("w => w.scrollWidth <= w.clientWidth"), "the runs table is wider than the window"
        right = wrap.evaluate("w => w.getBoundingClientRect().right")
        for cell in page.locator("[data-testid=run-row] td").all():
            assert cell.evaluate("c => c.getBoundingClientRect().right") <= right + 0.5, cell.inner_text()
        # a long summary is kept to three lines and held whole in its title
        summary = page.locator(f"[data-run-id='{harness}'] td.summary .clamp")
        assert summary.get_attribute("title").startswith("failed: the upstream at ")
        assert summary.evaluate("s => s.getBoundingClientRect().height <= 3.5 * parseFloat(getComputedStyle(s).lineHeight)")
        # a command stays on one line
        code = page.locator(f"[data-run-id='{harness}'] td code")
        assert code.evaluate("c => c.getClientRects().length") == 1


def test_the_score_and_compare_forms_submit_real_jobs(tmp_path: Path, page) -> None:  # noqa: F811
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel()) as d:
        _open(page, d.url + "/#/jobs")
        page.get_by_test_id("score-task").fill("Write a function that returns the sum of a list of numbers.")
        page.get_by_test_id("score-candidate").fill("GOOD def total(xs): return sum(xs)")
        page.get_by_test_id("score-criteria").select_option("agent")
        page.get_by_test_id("score-form").get_by_role("button").click()
        jobs = page.get_by_test_id("job-row")
        expect(jobs).to_have_count(1)
        expect(jobs.first).to_have_attribute("data-status", "done", timeout=60_000)
        page.get_by_test_id("compare-task").fill("Write a function that returns the sum of a list of numbers.")
        page.get_by_test_id("compare-a").fill("def total(xs): return 0")
        page.get_by_test_id("compare-b").fill("GOOD def total(xs): return sum(xs)")
        page.get_by_test_id("compare-form").get_by_role("button").click()
        expect(jobs).to_have_count(2)
        expect(jobs.first).to_have_attribute("data-status", "done", timeout=60_000)  # newest first
        with d.client() as c:
            listed = c.get("/api/jobs").json()["jobs"]
        compare, score = listed
        assert score["kind"] == "score" and score["params"]["criteria"] == "agent", score
        assert compare["kind"] == "compare" and compare["params"]["b"].startswith("GOOD"), compare
        _follow(page, jobs.first.get_by_test_id("job-run-link"))
        assert page.url.endswith(f"#/runs/{compare['run_id']}")
        expect(page.locator(".verdict")).to_contain_text("P(A beats B)")
        with d.client() as c:
            p = c.get(f"/api/jobs/{compare['id']}/result").json()["result"]["p_a_wins"]
        assert p < 0.5, "the scripted double prefers the GOOD response, B"
        expect(page.locator(".verdict .kpi").first).to_contain_text(f"{p:.3f}")
        # a form with a field missing says so, and submits nothing
        _open(page, d.url + "/#/jobs")
        page.get_by_test_id("score-form").get_by_role("button").click()
        expect(page.get_by_test_id("score-form").locator(".error-box")).to_have_text("give the task and the response")
        expect(jobs).to_have_count(2)


def test_the_jobs_page_shows_every_attempt_and_run_of_a_resumed_job(tmp_path: Path, page) -> None:  # noqa: F811
    path = tmp_path / "s.sqlite3"
    earlier = Store.open(path)  # a server that died while the job ran: its run was interrupted
    table = JobTable(earlier)
    job_id = table.add("score", {"task": "Sum a list.", "candidate": "GOOD sum(xs)", "criteria": "general",
                                 "scale": "letters", "repeats": None})
    first = earlier.start_run("score", "scripted:test-double", {"job": job_id})
    earlier.finish_run(first, "interrupted", None)
    table.update(job_id, status="running", attempts=1, run_id=first)
    with dashboard(path, ScriptedScoreModel()) as d:  # the new server queues the job again: attempt 2
        job = d.wait(job_id)
        assert job["status"] == "done" and job["attempts"] == 2 and job["run_id"] != first, job
        with d.client() as c:
            runs = c.get(f"/api/jobs/{job_id}").json()["runs"]
            assert [(r["id"], r["status"]) for r in runs] == [(first, "interrupted"), (job["run_id"], "ok")]
            assert c.get("/api/jobs").json()["jobs"][0]["runs"] == runs
        _open(page, d.url + "/#/jobs")
        row = page.locator(f"[data-testid=job-row][data-job-id='{job_id}']")
        expect(row.get_by_test_id("job-attempts")).to_contain_text("2 attempts")
        listed = row.get_by_test_id("job-attempt-run")
        expect(listed).to_have_count(2)
        expect(listed.nth(0)).to_have_attribute("data-run-id", str(first))
        expect(listed.nth(0)).to_contain_text(f"run #{first} interrupted")
        expect(listed.nth(1)).to_contain_text(f"run #{job['run_id']} ok")
        _follow(page, listed.nth(0).get_by_role("link"))
        assert page.url.endswith(f"#/runs/{first}")
        expect(page.get_by_test_id("run-status")).to_have_text("interrupted")


def test_the_live_pages_header_counts_grow_with_the_curve_and_a_point_opens_its_step(tmp_path: Path, page) -> None:  # noqa: F811
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel()) as d:
        log = RunLog(d.store)
        run_id = d.store.start_run("track", "scripted:progress-double", {"trajectory": ["live.jsonl"]})
        log.record_steps(run_id, "live", [Step(role="agent", text=f"step {n} text") for n in range(1, 7)])

        def point(step: int, value: float, tokens: int) -> None:
            """A scored checkpoint: its call (``tokens`` prompt tokens, 2 completion) and its point."""
            d.store.put_call(f"k{step}", prompt_tokens=tokens, completion_tokens=2, **CALL)
            d.store.link_call(run_id, f"k{step}", cache_hit=False)
            log.emit(run_id, "point", {"trajectory": "live", "point": {"step": step, "value": value,
                                                                         "label_mass": 0.9, "label_probs": {}}})

        point(1, 0.1, 100)
        _open(page, f"{d.url}/#/runs/{run_id}")
        page.evaluate("window.__sameDocument = 1")
        expect(page.get_by_test_id("live")).to_be_visible()
        expect(page.get_by_test_id("run-calls")).to_have_text("1")
        expect(page.get_by_test_id("run-tokens")).to_have_text("100 prompt · 2 completion")
        expect(page.get_by_test_id("run-steps")).to_have_text("6")
        log.record_steps(run_id, "live", [Step(role="agent", text=f"step {n} text") for n in range(7, 10)])  # the agent goes on
        point(2, 0.3, 250)
        point(3, 0.6, 400)
        points = page.locator("[data-testid=curve][data-trajectory=live] [data-testid=curve-point]")
        expect(points).to_have_count(3)
        expect(page.get_by_test_id("run-calls")).to_have_text("3")  # the header follows the curve
        expect(page.get_by_test_id("run-tokens")).to_have_text("750 prompt · 6 completion")
        expect(page.get_by_test_id("run-steps")).to_have_text("9")
        expect(page.get_by_test_id("live")).to_be_visible()
        assert page.evaluate("window.__sameDocument") == 1, "the page was reloaded"
        # a point opens the trajectory viewer at its step (checkpoint 3: the third step, row "3", place 2)
        page.evaluate("document.body.dataset.ready = '0'")
        points.nth(2).click()
        page.wait_for_selector(READY)
        assert page.url.endswith(f"#/runs/{run_id}/trajectory/live?step=3"), page.url
        expect(page.locator("[data-testid=step-detail] .detail-head strong")).to_have_text("step 3")
        expect(page.get_by_test_id("step-text")).to_have_text("step 3 text")
        expect(page.locator("[data-testid=step-row].selected")).to_have_attribute("data-index", "2")
        d.store.finish_run(run_id, "ok", {})
