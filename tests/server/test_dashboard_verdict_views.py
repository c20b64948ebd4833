"""The verdict views in real headless Chromium against the real server: position bias on the
matrix cell and in the pair panel, one numbering of candidates, and full names.

Runs are written straight into the store (a select run's result as ``Selection.to_dict`` writes
it); the server, its views and the browser are the real ones.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import httpx
import pytest
from playwright.sync_api import expect

from tests.server.test_dashboard_browser import _open, browser, page  # noqa: F401  (fixtures)
from tests.support.dashboard import dashboard
from tests.support.scripted_model import ScriptedScoreModel

PAYLOAD = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">'
LONG = "merge-diff-arc-agi-task__attempt-with-a-rather-long-identifier-" + "x" * 40 + "-tail-ZQ9"


class ProbedScriptedModel(ScriptedScoreModel):
    """TEST DOUBLE: the scripted model, also answering the proxy's start-up probe (no response in it)."""

    def _slot_text(self, req, header=None):
        user = req.messages[-1].content
        if "## Response" not in user and "## First response" not in user:
            return ""  # the probe: any label distribution shows it has logprobs
        return super()._slot_text(req, header)


def _finished(store, command: str, args: dict, result: dict) -> int:
    run_id = store.start_run(command, "scripted:test-double", args)
    store.finish_run(run_id, "ok", result)
    return run_id


@contextmanager
def _entered_off_loop(cm):
    """Enter ``cm`` in a worker thread: Playwright's sync API keeps an event loop running in this
    one, and the proxy's start-up probe uses the synchronous gateway, which refuses to run inside one."""
    with ThreadPoolExecutor(1) as pool:
        value = pool.submit(cm.__enter__).result()
    try:
        yield value
    finally:
        cm.__exit__(None, None, None)


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


def _pick_of(names: list[str]) -> dict:
    """A finished round robin over ``names`` (index order), candidate 1 first."""
    ranking = [{"rank": r + 1, "index": i, "id": names[i], "score": 0.5 - r / 10, "criteria": {}}
               for r, i in enumerate([1, 0, 2])]
    comparisons = [{"i": 1, "j": 0, "repeat": 0, "p": 0.9}, {"i": 1, "j": 2, "repeat": 0, "p": 0.8},
                   {"i": 0, "j": 2, "repeat": 0, "p": 0.6}]
    return {"ranking": ranking, "index": 1, "best": {"id": names[1]}, "confidence": 0.5, "decided": False,
            "method": "round_robin", "reason": {"text": "1 over 0"}, "task": {"id": "t", "text": "Do it."},
            "tournament": {"comparisons": comparisons, "strengths": [0.0, 0.2, -0.2]}}


@pytest.mark.parametrize(("names", "labels"), [
    (["candidate-0", "candidate-1", "candidate-2"], ["#1 candidate-1", "#0 candidate-0", "#2 candidate-2"]),
    (["merge-diff__5Yk2WfS", "merge-diff__djqxa8x", "merge-diff__Ga3s6zL"], ["#1 …djqxa8x", "#0 …5Yk2WfS", "#2 …Ga3s6zL"]),
])
def test_short_names_stay_whole_and_only_long_ones_lose_their_shared_prefix(tmp_path, page, names, labels) -> None:
    """A proxy's candidates are "candidate-0", "candidate-1", ...: they were shown as "#1 …1"."""
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel()) as d:
        run = _finished(d.store, "select", {}, _pick_of(names))
        _open(page, f"{d.url}/#/runs/{run}")
        expect(page.get_by_test_id("pick-pick")).to_have_text(labels[0])
        bars = page.locator("[data-testid=winmass-chart] .axis-label")  # each holds its text, then a <title>
        assert bars.evaluate_all("els => els.map((e) => e.firstChild.textContent)") == labels
        matrix = page.locator("[data-testid=heatmap] > text.axis-label")  # column labels, then row labels
        assert set(labels) <= set(matrix.evaluate_all("els => els.map((e) => e.firstChild.textContent)"))


def test_a_proxied_requests_page_shows_the_conversation_the_candidates_side_by_side_and_the_sent_one(
        tmp_path, page) -> None:
    """A real request through the openai SDK to the real proxy: two upstream candidates (a FaultServer
    double, one answering in text, one with a tool call), the scripted test double as verifier."""
    import itertools
    import threading

    from tests.proxy.conftest import BASH, fault_uri, proxied, settings_for, tool_reply
    from tests.support.fault_server import FaultServer

    turn, lock = itertools.count(), threading.Lock()

    def reply(body):
        with lock:
            k = next(turn)
        return ({"content": f"GOOD: the tests pass. {PAYLOAD}"} if k % 2 == 0
                else tool_reply("bash", {"cmd": "pytest -q", "note": PAYLOAD}, call_id="call_up1"))

    messages = [{"role": "user", "content": f"Fix the failing test. {PAYLOAD}"},
                {"role": "assistant", "content": "Let me look.", "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": f"tests/ src/ {PAYLOAD}"}]
    with FaultServer(chat_reply=reply) as up, \
            _entered_off_loop(proxied(tmp_path / "s.sqlite3", settings_for((fault_uri(up), 2)), ProbedScriptedModel())) as p:
        raw = p.openai().chat.completions.with_raw_response.create(model="m", messages=messages, tools=[BASH])
        assert raw.headers["x-veriscale-pick"] == "verified"
        run = p.run(raw.headers["x-veriscale-run"])
        conv = run.result["conversation"]  # what the run keeps for the page
        assert [m["role"] for m in conv["messages"]] == ["user", "assistant", "tool"] and conv["tools"] == ["bash"]
        sent = run.result["winner"]
        assert "GOOD" in run.result["candidates"][sent]["reply"]["text"]

        _open(page, f"{p.url}/#/runs/{run.id}")
        expect(page.get_by_test_id("proxy-page")).to_be_visible()
        expect(page.get_by_test_id("proxy-how")).to_have_text("verified")
        expect(page.get_by_test_id("proxy-sent")).to_have_text(f"candidate-{sent}")
        # the conversation: the tool result sits inside the block of the call it answers
        conversation = page.get_by_test_id("conversation")
        expect(conversation.get_by_test_id("message")).to_have_count(2)  # user, assistant (the tool result is in its call)
        call = conversation.get_by_test_id("tool-call")
        expect(call.get_by_test_id("tool-name")).to_have_text("bash")
        expect(call.get_by_test_id("tool-args")).to_have_text('{\n  "cmd": "ls"\n}')
        expect(call.get_by_test_id("tool-result")).to_contain_text(f"tests/ src/ {PAYLOAD}")
        expect(conversation).to_contain_text(f"Fix the failing test. {PAYLOAD}")
        # the candidates side by side, the sent one marked
        cards = page.get_by_test_id("candidate-card")
        expect(cards).to_have_count(2)
        sent_card = page.locator(f"[data-testid=candidate-card][data-index='{sent}']")
        expect(sent_card).to_have_attribute("data-sent", "1")
        expect(sent_card.get_by_test_id("sent-chip")).to_have_text("sent")
        expect(sent_card.get_by_test_id("candidate-text")).to_have_text(f"GOOD: the tests pass. {PAYLOAD}")
        other = page.locator(f"[data-testid=candidate-card][data-index='{1 - sent}']")
        expect(other).to_have_attribute("data-sent", "0")
        expect(other.get_by_test_id("tool-name")).to_have_text("bash")
        expect(other.get_by_test_id("tool-args")).to_contain_text('"cmd": "pytest -q"')
        boxes = [c.bounding_box() for c in cards.all()]
        assert abs(boxes[0]["y"] - boxes[1]["y"]) < 2 and boxes[0]["x"] != boxes[1]["x"], "the candidates are not side by side"
        # the tournament behind the pick, in the same page
        tournament = page.get_by_test_id("tournament")
        expect(tournament.get_by_test_id("selection-page")).to_be_visible()
        expect(tournament.get_by_test_id("candidate-row")).to_have_count(2)
        assert page.evaluate("typeof window.__pwned") == "undefined"
        assert page.evaluate("document.querySelectorAll('img').length") == 0


def test_the_trajectory_viewer_shows_tool_calls_as_blocks_with_their_results_and_step_time_and_tokens(
        tmp_path, page) -> None:
    import json
    from pathlib import Path

    from veriscale.data.importers import atif
    from veriscale.data.model import Step
    from veriscale.engine.run_log import RunLog

    trial = Path(__file__).resolve().parents[2] / "examples" / "progress" / "success_trajectory.json"
    (cand,) = atif.load(json.loads(trial.read_text()), "success_trajectory.json")
    steps = cand.trajectory.steps
    two_calls = Step(role="agent", text=f"Two at once. {PAYLOAD}", observation="1\n2",
                     tool_calls=[{"name": "ls", "arguments": {"path": PAYLOAD}, "id": "k1"},
                                 {"name": "wc", "arguments": {}, "id": "k2"}], tool_results={"k1": "1", "k2": "2"})
    with dashboard(tmp_path / "s.sqlite3", ScriptedScoreModel()) as d:
        run = _finished(d.store, "track", {"paths": ["t.json"]}, {"curves": []})
        RunLog(d.store).record_steps(run, "trial", [*steps, two_calls])
        _open(page, f"{d.url}/#/runs/{run}/trajectory/trial")
        rows = page.get_by_test_id("step-row")
        expect(rows.first.get_by_test_id("row-tool")).to_have_text("bash_command")
        rows.nth(1).click()
        detail = page.get_by_test_id("step-detail")
        call = detail.get_by_test_id("tool-call")
        expect(call).to_have_count(1)
        expect(call.get_by_test_id("tool-name")).to_have_text("bash_command")
        expect(call.get_by_test_id("tool-args")).to_contain_text('"keystrokes"')
        expect(call.get_by_test_id("tool-result")).to_contain_text(steps[1].tool_results["call_1_1"].strip()[:40])
        expect(detail.get_by_test_id("step-text")).to_have_text(steps[1].text)
        # per-step time and tokens, as the ATIF step has them; the time since the step before
        expect(detail.get_by_test_id("step-time")).to_have_text("2025-10-31 10:49:20")
        expect(detail.get_by_test_id("step-took")).to_have_text("+11.9 s since the step before")
        expect(detail.get_by_test_id("step-prompt-tokens")).to_have_text("1,459 prompt tokens")
        expect(detail.get_by_test_id("step-completion-tokens")).to_have_text("1,108 completion tokens")
        # two calls: each result under its own call, no loose output block
        rows.nth(len(steps)).click()
        expect(detail.get_by_test_id("tool-call")).to_have_count(2)
        expect(detail.get_by_test_id("tool-result")).to_have_text(["result1", "result2"])
        expect(detail.get_by_test_id("step-observation")).to_have_count(0)
        expect(detail.get_by_test_id("tool-args").first).to_contain_text(json.dumps(PAYLOAD)[1:-1])  # as JSON text
        expect(detail.get_by_test_id("step-meta")).to_have_count(0)
        assert page.evaluate("typeof window.__pwned") == "undefined"
        assert page.evaluate("document.querySelectorAll('img').length") == 0


def test_a_proxied_pick_with_a_failed_candidate_numbers_it_as_its_card(tmp_path, page) -> None:
    """Three upstreams through the openai SDK, candidate 0 a closed port: the tournament's table lists
    it as #0, failed, and the pick is #2, the card sent as candidate-2 (scripted test double verifier)."""
    from tests.proxy.conftest import fault_uri, proxied, settings_for
    from tests.proxy.test_numbering import closed_port_uri
    from tests.support.fault_server import FaultServer

    with FaultServer(chat_reply="Push it now.") as bad, FaultServer(chat_reply="GOOD: run the tests first.") as good:
        settings = settings_for((closed_port_uri(), 1), (fault_uri(bad), 1), (fault_uri(good), 1), schedule="round_robin")
        with _entered_off_loop(proxied(tmp_path / "s.sqlite3", settings, ProbedScriptedModel())) as p:
            raw = p.openai().chat.completions.with_raw_response.create(
                model="m", messages=[{"role": "user", "content": "Next step?"}])
            assert raw.headers["x-veriscale-pick"] == "verified"
            _open(page, f"{p.url}/#/runs/{raw.headers['x-veriscale-run']}")
            expect(page.get_by_test_id("proxy-sent")).to_have_text("candidate-2")
            tournament = page.get_by_test_id("tournament")
            expect(tournament.get_by_test_id("candidate-row")).to_have_count(3)
            failed = tournament.locator("[data-testid=candidate-row][data-index='0']")
            expect(failed.get_by_test_id("cand-number")).to_have_text("#0")
            expect(failed.get_by_test_id("failed-chip")).to_have_text("failed")
            expect(tournament.get_by_test_id("pick-pick")).to_contain_text("#2")
            expect(tournament.locator("[data-testid=candidate-row][data-index='2']")).to_contain_text("candidate-2")
            expect(page.locator("[data-testid=candidate-card][data-index='0']")).to_contain_text("failed")
