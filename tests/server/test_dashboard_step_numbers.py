"""One step numbering in a real headless Chromium against the real server (issue 21).

A real track job (on the scripted progress test double, named as such) scores a trajectory;
its curve counts steps from 1 (checkpoint 5 is the fifth step). A curve point's link, the
viewer's row label, the opened step's header and the REST pages the viewer reads must all give
that step the same number.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from playwright.sync_api import expect

from tests.server.test_dashboard_browser import READY, _open, browser, page  # noqa: F401  (fixtures)
from tests.support.dashboard import dashboard
from tests.support.scripted_progress import ScriptedProgressModel

TASK = "Write a function that returns the sum of a list of numbers."
WORDS = ["UP alpha", "bravo", "UP charlie", "DOWN delta", "UP echo", "foxtrot", "UP golf", "hotel"]


def _trajectory(path: Path) -> Path:
    """One run as an OpenAI-messages JSONL line: the task, then one assistant step a word."""
    messages = [{"role": "user", "content": TASK}] + [{"role": "assistant", "content": w} for w in WORDS]
    path.write_text(json.dumps({"id": "t1", "messages": messages}) + "\n")
    return path


def test_a_curve_points_link_the_row_and_the_opened_step_give_one_step_number(tmp_path: Path, page) -> None:  # noqa: F811
    traj = _trajectory(tmp_path / "t1.jsonl")
    with dashboard(tmp_path / "s.sqlite3", ScriptedProgressModel(), roots=(tmp_path,)) as d:
        job = d.wait(d.submit("track", {"paths": [str(traj)], "checkpoints": [3, 5, 8]})["id"])
        assert job["status"] == "done", job
        run_id = job["run_id"]
        # the curve counts from 1: checkpoint 5 is the prefix that ends with the fifth step
        curve = httpx.get(f"{d.url}/api/runs/{run_id}/progress").json()["curves"][0]
        assert [p["step"] for p in curve["points"]] == [3, 5, 8]

        # the REST pages the viewer reads give each step that number, beside its 0-based place
        api = f"{d.url}/api/runs/{run_id}/steps"
        fifth = httpx.get(api, params={"trajectory": "t1", "offset": 4, "limit": 1}).json()["steps"][0]
        assert (fifth["index"], fifth["step"], fifth["text"]) == (4, 5, "UP echo")
        found = httpx.get(api + "/find", params={"trajectory": "t1", "q": "echo"}).json()
        assert (found["matches"], found["steps"]) == ([4], [5])

        _open(page, f"{d.url}/#/runs/{run_id}")
        point = page.locator("[data-testid=curve][data-trajectory=t1] [data-testid=curve-point][data-step='5']")
        expect(point.locator("title")).to_contain_text("step 5:")
        page.evaluate("document.body.dataset.ready = '0'")
        point.click()
        page.wait_for_selector(READY)
        assert page.url.endswith(f"#/runs/{run_id}/trajectory/t1?step=5"), page.url  # the link target
        selected = page.locator("[data-testid=step-row].selected")
        expect(selected).to_contain_text("UP echo")  # the fifth step opened ...
        expect(selected.locator(".idx")).to_have_text("5")  # ... its row says 5 ...
        head = page.locator("[data-testid=step-detail] .detail-head")
        expect(head.locator("strong")).to_have_text("step 5")  # ... and so does its header, once
        expect(head).not_to_contain_text("#4")
        expect(page.get_by_test_id("step-text")).to_have_text("UP echo")

        # any row: the label it shows is the number its header opens with
        row = page.locator("[data-testid=step-row]").filter(has_text="bravo")
        expect(row.locator(".idx")).to_have_text("2")
        row.click()
        expect(head.locator("strong")).to_have_text("step 2")
        expect(page.get_by_test_id("step-text")).to_have_text("bravo")
        # and ?step=N typed by hand opens the row labelled N
        _open(page, f"{d.url}/#/runs/{run_id}/trajectory/t1?step=8")
        expect(selected.locator(".idx")).to_have_text("8")
        expect(head.locator("strong")).to_have_text("step 8")
        expect(page.get_by_test_id("step-text")).to_have_text("hotel")
