"""The dashboard's runs list has a cost column: calls, prompt tokens sent / processed ("?" where a
server did not say) and, with a price table, money. Real server, real headless Chromium; the run
and its calls are written straight into the store."""

from __future__ import annotations

from pathlib import Path

import httpx
from playwright.sync_api import expect

from tests.server.test_dashboard_browser import READY, browser, page  # noqa: F401  (fixtures)
from tests.support.dashboard import dashboard
from tests.support.scripted_model import ScriptedScoreModel
from veriscale.engine.prices import parse_prices


def _run_with_calls(store) -> tuple[int, int]:
    known = store.start_run("compare", "http://h/v1#m1", {})
    silent = store.start_run("compare", "http://h/v1#m1", {})
    common = dict(model="http://h/v1#m1", fingerprint="f", prompt_version="p", request={}, status="ok",
                  response={"label_probs": {}})
    store.put_call("k1", prompt_tokens=1200, cached_tokens=1000, completion_tokens=4, **common)
    store.put_call("k2", prompt_tokens=300, completion_tokens=1, **common)  # its server said nothing
    store.link_call(known, "k1", cache_hit=False)
    store.link_call(silent, "k2", cache_hit=False)
    store.link_call(silent, "k1", cache_hit=True)
    for run in (known, silent):
        store.finish_run(run, "ok", {"p_a_wins": 0.6})
    return known, silent


def test_the_runs_list_shows_each_runs_cost_and_money_with_a_price_table(tmp_path: Path, page) -> None:  # noqa: F811
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel(), prices=parse_prices("m1=2/0.5/8", "--prices")) as d:
        known, silent = _run_with_calls(d.store)
        listed = {r["id"]: r["cost"] for r in httpx.get(d.url + "/api/runs").json()["runs"]}
        assert listed[known]["prompt_tokens"] == 1200 and listed[known]["prompt_tokens_processed"] == 200
        assert listed[silent]["prompt_tokens_processed"] is None and listed[silent]["cache_hits"] == 1
        assert listed[known]["money"]["usd"] == (200 * 2 + 1000 * 0.5 + 4 * 8) / 1e6
        page.goto(d.url + "/#/runs")
        page.wait_for_selector(READY)
        expect(page.locator("th", has_text="cost")).to_have_count(1)
        cells = {row.get_attribute("data-run-id"): row.get_by_test_id("run-cost")
                 for row in page.get_by_test_id("run-row").all()}
        expect(cells[str(known)]).to_have_text("1 call · 1,200 sent / 200 processed tok · $0.0009")
        expect(cells[str(silent)]).to_have_text("1 call (+1 cached) · 300 sent / ? processed tok · $0.0006 (at most)")


def test_without_a_price_table_the_cost_column_has_no_money(tmp_path: Path) -> None:
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel()) as d:
        known, _ = _run_with_calls(d.store)
        cost = next(r["cost"] for r in httpx.get(d.url + "/api/runs").json()["runs"] if r["id"] == known)
        assert cost == {"calls": 1, "cache_hits": 0, "prompt_tokens": 1200, "prompt_tokens_processed": 200,
                        "completion_tokens": 4, "tokens": 1204}
