"""The dashboard of ``veriscale serve`` in a real headless Chromium against the real server.

Verdicts come from the scripted test doubles (named as such) or from runs written straight into
the store; the server, its security headers, the event stream and the browser are the real ones.
Pages say ``body[data-ready="1"]`` once their data is rendered.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from tests.server.test_harness_view import harness_run, materialized_task  # noqa: F401  (fixtures)
from tests.support.browser import chromium, new_page
from tests.support.dashboard import dashboard
from tests.support.scripted_model import ScriptedScoreModel
from veriscale.data.model import Step
from veriscale.engine.run_log import RunLog
from veriscale.server.security import CSP

TASK = "Write a function that returns the sum of a list of numbers."
PAYLOAD = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">'
READY = "body[data-ready='1']"
ROWS = "document.querySelectorAll('[data-testid=step-row]').length"
#: the last-resort wait for what the live event stream delivers (it polls the store; a loaded machine is slow)
LIVE_WAIT_MS = 120_000


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@pytest.fixture()
def page(browser):
    with new_page(browser) as p:
        p.set_default_timeout(20_000)
        expect.set_options(timeout=20_000)
        yield p
        assert not [e for e in p.errors if "__pwned" not in e], f"the page logged errors: {p.errors}"


def _open(page, url: str) -> None:
    """Go to url (often only a new #route of the same document) and wait for its data."""
    page.evaluate("document.body && (document.body.dataset.ready = '0')")
    page.goto(url)
    page.wait_for_selector(READY)


def _follow(page, link) -> None:
    """Click a link to another #route and wait for that page's data."""
    page.evaluate("document.body.dataset.ready = '0'")
    link.click()
    page.wait_for_selector(READY)


def _finished(store, command: str, args: dict, result: dict, status: str = "ok") -> int:
    run_id = store.start_run(command, "scripted:test-double", args)
    store.finish_run(run_id, status, result)
    return run_id


# -- 1 ----------------------------------------------------------------------------------------
def test_runs_list_pages_and_search_narrows_it(tmp_path: Path, page) -> None:
    model = ScriptedScoreModel()
    model.is_embedded = True  # the test double poses as the embedded model: the banner must show
    with dashboard(tmp_path / "s.sqlite3", model) as d:
        for n in range(57):
            _finished(d.store, "score", {"criteria": f"filler-{n}"}, {"reward": 0.5})
        compare = _finished(d.store, "compare", {"criteria": "needle-criteria"}, {"p_a_wins": 0.75})
        running = d.store.start_run("select", "scripted:test-double", {"paths": ["pool.jsonl"]})
        _open(page, d.url + "/#/runs")
        expect(page.get_by_test_id("embedded-banner")).to_be_visible()
        expect(page.get_by_test_id("embedded-banner")).to_contain_text("SmolLM2-135M")
        expect(page.get_by_test_id("runs-total")).to_have_text("59 runs")
        rows = page.get_by_test_id("run-row")
        expect(rows).to_have_count(50)  # one page of the 59, newest first
        assert rows.first.get_attribute("data-run-id") == str(running)
        page.get_by_role("button", name="Older ›").click()
        expect(rows).to_have_count(9)
        # the search goes to the server (q=) and narrows the list to the one matching run
        page.get_by_test_id("runs-search").fill("needle-crit")
        expect(rows).to_have_count(1)
        expect(rows.first).to_have_attribute("data-run-id", str(compare))
        expect(page.get_by_test_id("runs-total")).to_have_text("1 run")
        page.get_by_test_id("runs-search").fill("no run says this")
        expect(rows).to_have_count(0)
        page.get_by_test_id("runs-search").fill("")
        expect(page.get_by_test_id("runs-total")).to_have_text("59 runs")
        # a row opens its run; a compare run shows its verdict and its args as text
        page.get_by_test_id("runs-search").fill("needle-crit")
        expect(rows).to_have_count(1)
        _follow(page, rows.first)
        assert page.url.endswith(f"#/runs/{compare}")
        expect(page.get_by_test_id("run-args")).to_contain_text('"criteria": "needle-criteria"')
        expect(page.locator(".verdict")).to_contain_text("0.750")


# -- 2 ----------------------------------------------------------------------------------------
def test_a_select_jobs_heatmap_cell_opens_its_judgements_with_the_exact_prompt(tmp_path: Path, page) -> None:
    pool = tmp_path / "runs"
    pool.mkdir()
    (pool / "task.md").write_text(TASK)
    (pool / "a.md").write_text("def total(xs): return 0  # wrong")
    (pool / "b.md").write_text("GOOD def total(xs): return sum(xs)")
    (pool / "c.md").write_text("def total(xs): return max(xs)")
    paths = [str(pool / n) for n in ("task.md", "a.md", "b.md", "c.md")]
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel(), roots=(tmp_path,)) as d:
        # submitted from the Jobs page's form; the list refreshes itself until the job is done
        _open(page, d.url + "/#/jobs")
        page.get_by_test_id("select-paths").fill("\n".join(paths))
        page.get_by_test_id("select-form").get_by_role("button").click()
        job = page.get_by_test_id("job-row")
        expect(job).to_have_count(1)
        expect(job).to_have_attribute("data-status", "done", timeout=60_000)
        done = d.wait(int(job.get_attribute("data-job-id")))
        assert done["status"] == "done" and done["params"]["paths"] == paths, done
        _follow(page, job.get_by_test_id("job-run-link"))
        assert page.url.endswith(f"#/runs/{done['run_id']}")
        expect(page.get_by_test_id("selection-page")).to_be_visible()
        expect(page.get_by_test_id("embedded-banner")).to_have_count(0)
        with d.client() as c:
            sel = c.get(f"/api/runs/{done['run_id']}/selection").json()
        b = next(c["index"] for c in sel["candidates"] if c["id"] == "b")
        assert sel["best"] == b
        expect(page.get_by_test_id("candidate-row")).to_have_count(3)
        expect(page.get_by_test_id("candidate-row").first).to_have_attribute("data-index", str(b))  # rank 1: GOOD
        expect(page.get_by_test_id("pick-pick")).to_have_text(f"#{b} b")
        expect(page.get_by_test_id("winmass-chart").locator(".bar")).to_have_count(3)
        expect(page.get_by_test_id("winmass-chart").locator(".bar.best")).to_contain_text(f"#{b} b")
        cells = page.get_by_test_id("heatmap").get_by_test_id("heatmap-cell")
        compared = sum(v is not None for row in sel["matrix"] for v in row)
        assert compared > 0
        expect(cells).to_have_count(compared)  # one clickable cell per compared ordered pair, no more
        expect(page.get_by_test_id("judgement-panel")).to_have_count(0)
        cell = page.locator(f"[data-testid=heatmap-cell][data-i='{b}']").first
        j = int(cell.get_attribute("data-j"))
        cell.click()
        panel = page.get_by_test_id("judgement-panel")
        expect(panel).to_be_visible()
        expect(panel).to_have_attribute("data-i", str(b))
        page.wait_for_selector(READY)
        detail = panel.get_by_test_id("call-detail").first
        expect(detail).to_be_visible()
        key = detail.get_attribute("data-key")
        pair = [jd for jd in sel["judgements"] if {jd["i"], jd["j"]} == {b, j}]
        assert key in {k for jd in pair for k in jd["calls"]}, "the panel shows the calls of the clicked pair only"
        with d.client() as c:
            call = c.get(f"/api/calls/{key}").json()
        shown = [pre.text_content() for pre in detail.get_by_test_id("prompt-text").all()]
        assert shown == [m["content"] for m in call["messages"]]  # the exact prompt, message by message
        assert any("return sum(xs)" in text for text in shown) and any(TASK in text for text in shown)
        expect(detail.get_by_test_id("prefill")).to_have_text(call["prefill"])
        bars = detail.get_by_test_id("label-dist").locator("rect.dist-bar")
        expect(bars).to_have_count(len(call["labels"]))
        expect(detail.get_by_test_id("label-mass")).to_have_text(f"{call['label_mass']:.3f}")
        # P is shown from the row candidate's side: b (GOOD) beats the other in every judgement
        for text in panel.locator(".jd-p").all_inner_texts():
            assert float(text.split("=")[1]) > 0.5, text


# -- 3 ----------------------------------------------------------------------------------------
def test_a_running_track_run_grows_live_and_shows_when_it_finished(tmp_path: Path, page) -> None:
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel()) as d:
        log = RunLog(d.store)
        run_id = d.store.start_run("track", "scripted:progress-double", {"trajectory": ["live.jsonl"]})
        log.record_steps(run_id, "live", [Step(role="agent", text=f"step {n}") for n in range(12)])

        def point(step: int, value: float) -> None:
            log.emit(run_id, "point", {"trajectory": "live", "point": {"step": step, "value": value,
                                                                         "label_mass": 0.9, "label_probs": {}},
                                       "voc": 0.5})

        point(1, 0.1)
        point(2, 0.2)
        _open(page, f"{d.url}/#/runs/{run_id}")
        page.evaluate("window.__sameDocument = 1")
        points = page.locator("[data-testid=curve][data-trajectory=live] [data-testid=curve-point]")
        expect(points).to_have_count(2)
        expect(page.get_by_test_id("live")).to_be_visible()
        for step, value in ((3, 0.3), (4, 0.35), (5, 0.5)):
            # no sleep between points: each is emitted only once the page shows the one before, so every
            # point reaches the open page by its own turn of the stream (an event, not a wall-clock gap);
            # the timeout is a last resort for a slow loaded machine, never the pace of the test
            point(step, value)
            expect(points).to_have_count(step, timeout=LIVE_WAIT_MS)  # each point appears while the page stays open
        log.emit(run_id, "event", {"trajectory": "live", "event": {"kind": "stall", "step": 5, "value": 0.5,
                                                                    "message": "step 5: no progress"}})
        log.emit(run_id, "calls", {"done": 5, "planned": 12})
        expect(page.get_by_test_id("curve-event")).to_have_count(1, timeout=LIVE_WAIT_MS)
        expect(page.get_by_test_id("curve-event")).to_have_attribute("data-kind", "stall")
        expect(page.get_by_test_id("calls-progress")).to_contain_text("calls 5 / 12", timeout=LIVE_WAIT_MS)
        expect(page.get_by_test_id("run-status")).to_have_text("running")
        point(6, 0.9)
        d.store.finish_run(run_id, "ok", {})
        expect(page.get_by_test_id("run-status")).to_have_text("ok", timeout=LIVE_WAIT_MS)
        expect(page.get_by_test_id("live")).to_have_count(0, timeout=LIVE_WAIT_MS)
        expect(points).to_have_count(6, timeout=LIVE_WAIT_MS)
        assert page.evaluate("window.__sameDocument") == 1, "the page was reloaded"
        link = page.locator(".curve-head a").first
        assert link.get_attribute("href") == f"#/runs/{run_id}/trajectory/live"


# -- 4 ----------------------------------------------------------------------------------------
def test_a_5000_step_trajectory_keeps_the_dom_small_while_scrolling_searching_and_jumping(tmp_path: Path, page) -> None:
    errors = (1234, 4321, 4990)
    marks = (100, 2500, 4800)
    steps = []
    for n in range(5000):
        text = f"step {n}: ran a command\nmore output of step {n}"
        if n == 3777:
            text += "\nthe NEEDLE-XYZ is here"
        if n in marks:
            text += "\nMARKER line"
        steps.append(Step(role="agent", text=text, exit_code=1 if n in errors else 0))
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel()) as d:
        run_id = d.store.start_run("track", "scripted:progress-double", {})
        RunLog(d.store).record_steps(run_id, "long", steps)
        d.store.finish_run(run_id, "ok", {"curves": []})
        _open(page, f"{d.url}/#/runs/{run_id}/trajectory/long")
        viewport = page.get_by_test_id("trajectory-viewport")
        counts = []

        def check() -> None:
            n = page.evaluate(ROWS)
            counts.append(n)
            assert 0 < n < 1000, f"{n} step rows in the DOM"

        def row(index: int):
            return page.locator(f"[data-testid=step-row][data-index='{index}']")

        expect(row(0)).to_contain_text("step 0: ran a command")
        check()
        viewport.evaluate("el => { el.scrollTop = el.scrollHeight; }")
        expect(row(4999)).to_contain_text("step 4999: ran a command")
        expect(row(4999)).to_be_in_viewport()
        check()
        expect(row(0)).to_have_count(0)
        viewport.evaluate("el => { el.scrollTop = el.scrollHeight / 2; }")
        expect(row(2500)).to_contain_text("step 2500")
        check()
        viewport.evaluate("el => { el.scrollTop = 0; }")
        expect(row(0)).to_be_in_viewport()
        check()
        # jump to the next failed step, twice
        for want in errors[:2]:
            page.get_by_test_id("jump-error").click()
            expect(row(want)).to_have_class(re.compile(r"\bselected\b"))
            expect(row(want)).to_be_in_viewport()
            expect(row(want)).to_have_class(re.compile(r"\berror\b"))
            expect(page.get_by_test_id("step-detail")).to_contain_text(f"step {want}: ran a command")
            check()
        # search: the one match becomes visible and opens in the side panel
        page.get_by_test_id("step-search").fill("needle-xyz")
        page.get_by_test_id("step-search").press("Enter")
        expect(page.get_by_test_id("match-count")).to_have_text("1 of 1")
        expect(row(3777)).to_be_in_viewport()
        expect(page.get_by_test_id("step-text")).to_contain_text("the NEEDLE-XYZ is here")
        check()
        # several matches: the search starts at the selected step (3777), next wraps round, prev goes back
        page.get_by_test_id("step-search").fill("MARKER")
        page.get_by_test_id("step-search").press("Enter")
        expect(page.get_by_test_id("match-count")).to_have_text("3 of 3")
        expect(row(4800)).to_be_in_viewport()
        for k, want in ((1, 100), (2, 2500)):
            page.get_by_test_id("search-next").click()
            expect(page.get_by_test_id("match-count")).to_have_text(f"{k} of 3")
            expect(row(want)).to_be_in_viewport()
            expect(row(want)).to_have_class(re.compile(r"\bcurrent\b"))
            expect(page.get_by_test_id("step-text")).to_contain_text(f"step {want}: ran a command")
            check()
        page.get_by_test_id("search-prev").click()
        expect(page.get_by_test_id("match-count")).to_have_text("1 of 3")
        expect(row(100)).to_be_in_viewport()
        check()
        assert max(counts) < 100, counts  # only the rows in view and a few more


# -- 5 ----------------------------------------------------------------------------------------
def test_data_shaped_like_html_is_shown_as_text_and_never_runs(tmp_path: Path, page) -> None:
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel()) as d:
        key = "f" * 64
        messages = [{"role": "system", "content": "grade"}, {"role": "user", "content": f"## Response\n{PAYLOAD}"}]
        d.store.put_call(key, model="scripted", fingerprint="x", prompt_version="1", kind="score", status="ok",
                         request={"messages": messages, "prefill": PAYLOAD, "labels": ["A", "B"]},
                         response={"label_probs": {"A": 0.7, "B": 0.1}, "label_mass": 0.8, "unseen_mass": 0.0})
        ranking = [{"rank": 1, "index": 0, "id": PAYLOAD, "source": PAYLOAD, "score": 0.7, "criteria": {PAYLOAD: 0.9}},
                   {"rank": 2, "index": 1, "id": "plain", "source": "b", "score": 0.3, "criteria": {PAYLOAD: 0.2}}]
        result = {"ranking": ranking, "index": 0, "best": {"id": PAYLOAD}, "confidence": 0.8, "decided": True,
                  "method": "ppt", "reason": {"text": PAYLOAD}, "notes": [PAYLOAD], "task": {"id": "t", "text": PAYLOAD},
                  "tournament": {"comparisons": [{"i": 0, "j": 1, "repeat": 0, "p": 0.7,
                                                  "rewards": {PAYLOAD: [0.9, 0.2]}, "calls": [key]}]}}
        select = _finished(d.store, "select", {"paths": [PAYLOAD]}, result)
        RunLog(d.store).record_steps(select, PAYLOAD, [Step(role=PAYLOAD, text=PAYLOAD, exit_code=1)])
        other = _finished(d.store, PAYLOAD, {"note": PAYLOAD}, {"error": PAYLOAD}, status="failed")

        response = page.goto(d.url + "/#/runs")
        assert response.headers["content-security-policy"] == CSP
        page.wait_for_selector(READY)
        expect(page.get_by_test_id("run-row")).to_have_count(2)
        expect(page.get_by_test_id("runs-table")).to_contain_text(PAYLOAD)  # the summary names the pick
        page.get_by_test_id("runs-search").fill("__pwned")
        expect(page.get_by_test_id("run-row")).to_have_count(2)

        _open(page, f"{d.url}/#/runs/{select}")
        expect(page.get_by_test_id("candidate-row").first).to_contain_text(PAYLOAD)
        expect(page.get_by_test_id("reason")).to_have_text(PAYLOAD)
        page.get_by_test_id("heatmap-cell").first.click()
        detail = page.get_by_test_id("call-detail")
        expect(detail.get_by_test_id("prompt-text").nth(1)).to_have_text(f"## Response\n{PAYLOAD}")
        expect(detail.get_by_test_id("prefill")).to_have_text(PAYLOAD)
        link = page.locator("[data-testid=candidate-row] a").first  # the candidate's trajectory link
        assert link.get_attribute("href").startswith(f"#/runs/{select}/trajectory/")
        _follow(page, link)
        expect(page.get_by_test_id("trajectory-viewport")).to_be_visible()
        step = page.get_by_test_id("step-row").first
        expect(step).to_contain_text(PAYLOAD)
        step.click()
        expect(page.get_by_test_id("step-text")).to_have_text(PAYLOAD)

        _open(page, f"{d.url}/#/runs/{other}")
        expect(page.get_by_test_id("run-args")).to_contain_text(json.dumps(PAYLOAD)[1:-1])
        expect(page.locator("h1")).to_contain_text(PAYLOAD)
        expect(page.locator(".error-box").first).to_have_text(PAYLOAD)

        page.wait_for_timeout(200)
        assert page.evaluate("typeof window.__pwned") == "undefined"
        assert page.evaluate("document.querySelectorAll('img').length") == 0
        assert page.evaluate("[...document.scripts].map(s => s.getAttribute('src'))") == ["/static/js/app.js"]


# -- 6 ----------------------------------------------------------------------------------------
def test_the_harness_page_shows_the_claim_map_ledgers_adjudication_and_the_diff(harness_run: dict, page) -> None:  # noqa: F811
    root = harness_run["root"]
    with dashboard(root / "store.sqlite3", ScriptedScoreModel(), roots=(root,)) as d:
        _open(page, f"{d.url}/#/runs/{harness_run['parent']}")
        expect(page.get_by_test_id("harness-page")).to_be_visible()
        expect(page.get_by_test_id("task-outcome")).to_have_text("delivered")
        claim_map = page.get_by_test_id("claim-map")
        for status in ("consensus", "disputed", "omitted"):
            expect(claim_map.locator(f"[data-testid=claim][data-status={status}]").first).to_be_visible()
        growth = claim_map.locator("[data-testid=claim][data-status=disputed]"
                                   "[title='report.md:year-over-year revenue growth (%)']")
        expect(growth).to_contain_text("20 (r01, r03, r04)")
        expect(growth.locator(".rollout")).to_have_text(["r01", "r03", "r04", "r02"])
        expect(page.get_by_test_id("ledger").nth(1)).to_contain_text("1,240 is the Q2 figure")
        adjudication = page.get_by_test_id("adjudication")
        expect(adjudication).to_contain_text("best base")
        expect(adjudication.get_by_test_id("revision")).to_contain_text("challenger:C1")
        diff = page.locator("[data-testid=diff][data-path='report.md']")
        expect(diff).to_contain_text("--- r01/report.md")
        expect(diff.locator(".add", has_text="+Active customers: 1,310")).to_have_count(1)
        expect(diff.locator(".del", has_text="-Active customers: 1,240")).to_have_count(1)
        with httpx.Client(base_url=d.url) as c:
            task = c.get(f"/api/runs/{harness_run['parent']}/harness").json()["tasks"][0]
        want = next(x["diff"] for x in task["diffs"] if x["path"] == "report.md")
        assert diff.text_content() == want + "\n"  # the diff as text, every line of it
