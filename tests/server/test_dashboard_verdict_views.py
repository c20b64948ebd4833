"""The verdict views in real headless Chromium against the real server: position bias on the
matrix cell and in the pair panel, one numbering of candidates, and full names.

Runs are written straight into the store (a select run's result as ``Selection.to_dict`` writes
it); the server, its views and the browser are the real ones.
"""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.browser import chromium, new_page
from tests.support.dashboard import dashboard
from tests.support.scripted_model import ScriptedScoreModel

READY = "body[data-ready='1']"
PAYLOAD = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">'
LONG = "merge-diff-arc-agi-task__attempt-with-a-rather-long-identifier-" + "x" * 40 + "-tail-ZQ9"


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
    page.evaluate("document.body && (document.body.dataset.ready = '0')")
    page.goto(url)
    page.wait_for_selector(READY)


def _finished(store, command: str, args: dict, result: dict) -> int:
    run_id = store.start_run(command, "scripted:test-double", args)
    store.finish_run(run_id, "ok", result)
    return run_id


def _biased_selection() -> dict:
    """Three candidates given as (a, LONG, PAYLOAD); ranked LONG, a, PAYLOAD. Pair (0, 1) flips with
    the slot order: P(0 ≻ 1) = 0.9999 with 0 shown first (repeat 0), 0.0106 with 1 shown first."""
    ranking = [{"rank": 1, "index": 1, "id": LONG, "source": "long.md", "score": 0.5, "criteria": {"Correctness": 0.6}},
               {"rank": 2, "index": 0, "id": "a", "source": "a.md", "score": 0.3, "criteria": {"Correctness": 0.5}},
               {"rank": 3, "index": 2, "id": PAYLOAD, "source": "c.md", "score": 0.2, "criteria": {"Correctness": 0.4}}]
    comparisons = [{"i": 0, "j": 1, "repeat": 0, "p": 0.9999}, {"i": 0, "j": 1, "repeat": 1, "p": 0.0106},
                   {"i": 1, "j": 2, "repeat": 0, "p": 0.8}, {"i": 1, "j": 2, "repeat": 1, "p": 0.7},
                   {"i": 0, "j": 2, "repeat": 0, "p": 0.6}, {"i": 0, "j": 2, "repeat": 1, "p": 0.55}]
    return {"ranking": ranking, "index": 1, "best": {"id": LONG}, "confidence": 0.6, "decided": False,
            "method": "round_robin", "reason": {"text": "LONG over a"}, "task": {"id": "t", "text": "Do it."},
            "tournament": {"comparisons": comparisons, "strengths": [0.0, 0.1, -0.1]}}


def test_a_pair_that_flips_with_slot_order_is_marked_on_the_cell_and_in_the_panel(tmp_path, page) -> None:
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel()) as d:
        run = _finished(d.store, "select", {"paths": ["a.md", "long.md", "c.md"]}, _biased_selection())
        view = httpx.get(f"{d.url}/api/runs/{run}/selection").json()  # the REST view the page reads
        assert view["position_bias"] == [[0, 1]]
        assert view["orders"][0][1]["first"] == pytest.approx(0.9999)
        assert view["orders"][1][0]["first"] == pytest.approx(1 - 0.0106)  # P(1 ≻ 0) with 1 shown first
        _open(page, f"{d.url}/#/runs/{run}")
        cells = page.get_by_test_id("heatmap-cell")
        expect(cells).to_have_count(6)
        biased = page.locator("[data-testid=heatmap-cell][data-position-bias='1']")
        expect(biased).to_have_count(2)  # (0, 1) and its mirror (1, 0)
        assert sorted((c.get_attribute("data-i"), c.get_attribute("data-j")) for c in biased.all()) == [("0", "1"), ("1", "0")]
        expect(page.get_by_test_id("position-bias-mark")).to_have_count(2)
        expect(page.get_by_test_id("position-bias-note")).to_contain_text("1 pair(s) flip with the slot order")
        # the cell's hover title carries both orders
        title = page.locator("[data-testid=heatmap-cell][data-i='0'][data-j='1'] rect title").text_content()
        assert "row shown first: 0.9999" in title and "row shown second: 0.0106" in title and "position bias" in title

        page.locator("[data-testid=heatmap-cell][data-i='0'][data-j='1']").click()
        panel = page.get_by_test_id("judgement-panel")
        expect(panel.get_by_test_id("pair-mean")).to_have_text("0.505")
        expect(panel.get_by_test_id("order-first")).to_have_text("0.9999")
        expect(panel.get_by_test_id("order-second")).to_have_text("0.0106")
        expect(panel.get_by_test_id("position-bias")).to_contain_text("flips with the slot order")
        expect(panel.get_by_test_id("shown-first")).to_have_text(["#0 a shown first", f"#1 {LONG} shown first"])

        # a pair whose orders agree shows its orders and no warning
        page.locator("[data-testid=heatmap-cell][data-i='1'][data-j='2']").click()
        expect(panel.get_by_test_id("order-first")).to_have_text("0.8000")
        expect(panel.get_by_test_id("order-second")).to_have_text("0.7000")
        expect(panel.get_by_test_id("position-bias")).to_have_count(0)
        assert page.evaluate("typeof window.__pwned") == "undefined"


def test_one_numbering_in_table_charts_matrix_and_panel_and_names_are_whole(tmp_path, page) -> None:
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel()) as d:
        run = _finished(d.store, "select", {"paths": ["a.md", "long.md", "c.md"]}, _biased_selection())
        _open(page, f"{d.url}/#/runs/{run}")
        rows = page.get_by_test_id("candidate-row")
        # the table lists by rank, and names each candidate by the same #index as the charts
        expect(rows.get_by_test_id("cand-number")).to_have_text(["#1", "#0", "#2"])
        expect(rows.locator("td.num").first).to_have_text("1")
        expect(rows.nth(0)).to_contain_text(LONG)  # the whole name, wrapped, never cut
        labels = page.locator("[data-testid=winmass-chart] .axis-label")
        # win mass bars, by rank: each label starts with the candidate's #index; its title holds the full name
        assert [t[:2] for t in labels.all_text_contents()] == ["#1", "#0", "#2"]
        assert page.locator("[data-testid=winmass-chart] .axis-label title").first.text_content() == LONG
        rows_of_matrix = page.locator("[data-testid=heatmap] > text.axis-label")
        assert [t.text_content()[:2] for t in rows_of_matrix.all()][:3] == ["#0", "#1", "#2"]  # column labels
        # a long name fits the chart (cut at its start) and is whole in its title
        bar = page.locator("[data-testid=winmass-chart] .axis-label").first
        box = bar.bounding_box()
        chart = page.get_by_test_id("winmass-chart").bounding_box()
        assert box["x"] >= chart["x"] - 1, "the label runs off the chart's left edge"
        page.locator("[data-testid=heatmap-cell][data-i='0'][data-j='1']").click()
        expect(page.get_by_test_id("pair-names")).to_have_text(f"#0 a vs #1 {LONG}")
        expect(page.get_by_test_id("pick-pick")).to_contain_text("#1")
