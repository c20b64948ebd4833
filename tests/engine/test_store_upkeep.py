"""Pruning runs and vacuuming a store (``veriscale.engine.store_upkeep``), on real SQLite stores built
through the real APIs: runs opened with ``recorded_run``, calls made through the gateway on the
scripted test double, events and steps through ``RunLog``. Ages are set by writing a run's
timestamps and passing ``now``, never by waiting."""

from __future__ import annotations

import os
import time

import pytest

from tests.support.scripted_model import ScriptedScoreModel
from veriscale.data.model import Step
from veriscale.engine.call_leases import lease_owner
from veriscale.engine.run_liveness import ProcessIdentity
from veriscale.engine.run_log import RunLog
from veriscale.engine.run_scope import open_run, recorded_run
from veriscale.engine.store import Store
from veriscale.engine.store_upkeep import parse_duration, prune, store_bytes, vacuum
from veriscale.engine.sync_facade import CallExecutor, PlannedCall
from veriscale.errors import UserError
from veriscale.models.base import Message, ScoreRequest

DAY = 86400.0
NOW = time.time()  # "now" for the age filter: a run below is dated relative to it (undated: just made)


def _calls(*texts: str) -> list[PlannedCall]:
    return [PlannedCall(ScoreRequest(messages=(Message("user", f"## Response\n{t}\n## Criterion\nc"),),
                                     prefill="Score: ", labels=("A", "B"))) for t in texts]


class Fixture:
    """A store, a gateway on the scripted double, and helpers that record runs through them."""

    def __init__(self, path) -> None:
        self.store = Store.open(path)
        self.ex = CallExecutor(ScriptedScoreModel(), self.store, prompt_version="t")
        self.log = RunLog(self.store)

    def run(self, command: str, *texts: str, status: str = "ok", parent: int | None = None,
            age_days: float | None = None, events: int = 0) -> int:
        with recorded_run(self.store, command, "scripted", {}, parent=parent) as run:
            if texts:
                self.ex.run(_calls(*texts))
            for n in range(events):
                self.log.emit(run.id, "point", {"step": n, "value": 0.5})
            if status != "ok":
                run.finish(status, {"error": "it went wrong"})
        if age_days is not None:
            self.date(run.id, age_days)
        return run.id

    def date(self, run_id: int, age_days: float) -> None:
        at = NOW - age_days * DAY
        self.store.execute("UPDATE runs SET created_at = ?, finished_at = ?, heartbeat_at = ? WHERE id = ?",
                           (at - 60, at, at - 60, run_id))

    def keys(self, run_id: int) -> set[str]:
        return {c["key"] for c in self.store.run_calls(run_id)}

    def run_ids(self) -> set[int]:
        rows, _ = self.store.execute("SELECT id FROM runs")
        return {r[0] for r in rows}

    def call_keys(self) -> set[str]:
        rows, _ = self.store.execute("SELECT key FROM calls")
        return {r[0] for r in rows}

    def counts(self) -> dict[str, int]:
        return {t: self.store.execute(f"SELECT COUNT(*) FROM {t}")[0][0][0]
                for t in ("runs", "calls", "run_calls", "run_events", "run_steps", "call_leases")}


@pytest.fixture()
def fx(tmp_path):
    f = Fixture(tmp_path / "s.sqlite3")
    yield f
    f.store.close()


def test_a_call_a_kept_run_links_to_survives_and_one_only_the_pruned_run_used_goes(fx):
    pruned = fx.run("score", "shared answer", "only the failed run", status="failed")
    kept = fx.run("select", "shared answer", "only the kept run")
    shared = fx.keys(pruned) & fx.keys(kept)
    only_pruned = fx.keys(pruned) - shared
    assert len(shared) == 1 and len(only_pruned) == 1
    outside = fx.ex.run(_calls("made outside any run"))  # linked to no run at all
    assert outside[0].error is None and outside[0].response is not None

    report = prune(fx.store, statuses=["failed"])

    assert (report.runs, report.calls, report.links) == (1, 1, 2)
    assert report.run_ids == (pruned,) and not report.dry_run
    assert fx.run_ids() == {kept}
    assert fx.store.run(pruned) is None and fx.store.run_calls(pruned) == []
    keys = fx.call_keys()
    assert shared <= keys, "a call a kept run links to is never removed"
    assert not only_pruned & keys, "a call only the pruned run used is gone"
    assert fx.keys(kept) <= keys and len(keys) == 3  # the kept run's two, and the one made outside any run
    assert all(fx.store.get_call(k) is not None for k in fx.keys(kept))  # still a cache hit


def test_orphans_also_removes_calls_no_run_links_to(fx):
    kept = fx.run("select", "kept")
    fx.ex.run(_calls("made outside any run"))
    assert prune(fx.store, orphans=True, dry_run=True).calls == 1
    report = prune(fx.store, orphans=True)
    assert (report.runs, report.calls) == (0, 1)
    assert fx.call_keys() == fx.keys(kept)


def test_filters_by_kind_status_and_age_all_must_match(fx):
    old_ok_select = fx.run("select", "a", age_days=40)
    old_failed_select = fx.run("select", "b", status="failed", age_days=40)
    new_ok_select = fx.run("select", "c", age_days=1)
    old_ok_score = fx.run("score", "d", age_days=40)
    new_cancelled_score = fx.run("score", "e", status="cancelled", age_days=2)

    def would(**filters) -> set[int]:
        return set(prune(fx.store, dry_run=True, now=NOW, **filters).run_ids)

    assert would(kinds="select") == {old_ok_select, old_failed_select, new_ok_select}
    assert would(statuses=["failed", "cancelled"]) == {old_failed_select, new_cancelled_score}
    assert would(older_than="30d") == {old_ok_select, old_failed_select, old_ok_score}
    assert would(older_than=36 * 3600) == {old_ok_select, old_failed_select, old_ok_score, new_cancelled_score}
    assert would(older_than="30d", kinds=["select"], statuses=["ok"]) == {old_ok_select}
    assert would(kinds=["race"]) == set()

    report = prune(fx.store, older_than="30d", kinds="select", now=NOW)
    assert set(report.run_ids) == {old_ok_select, old_failed_select}
    assert fx.run_ids() == {new_ok_select, old_ok_score, new_cancelled_score}


def test_age_counts_from_when_the_run_ended(fx):
    long_run = fx.run("select", "a")
    fx.store.execute("UPDATE runs SET created_at = ?, finished_at = ? WHERE id = ?",
                     (NOW - 90 * DAY, NOW - 2 * DAY, long_run))  # started long ago, ended two days ago
    assert prune(fx.store, older_than="30d", dry_run=True, now=NOW).runs == 0
    assert prune(fx.store, older_than="1d", dry_run=True, now=NOW).run_ids == (long_run,)


def test_a_dry_run_reports_what_would_go_and_changes_nothing(fx):
    for n in range(3):
        fx.run("score", f"old {n}", f"shared {n % 2}", status="failed", age_days=10, events=4)
    kept = fx.run("select", "shared 0", age_days=10, events=2)
    RunLog(fx.store).record_steps(kept, "t", [Step(role="agent", text="kept step")])
    first = min(fx.run_ids())
    RunLog(fx.store).record_steps(first, "t", [Step(role="agent", text=f"s{n}") for n in range(5)])
    before, size = fx.counts(), store_bytes(fx.store.path)
    calls_before = fx.call_keys()

    dry = prune(fx.store, statuses="failed", dry_run=True)

    assert fx.counts() == before and fx.call_keys() == calls_before
    assert dry.dry_run and (dry.runs, dry.events, dry.steps, dry.links) == (3, 12, 5, 6)
    assert dry.calls == 4  # old 0-2, and "shared 1": "shared 0" is the kept run's too
    assert dry.bytes_before == size and dry.bytes_after == size
    real = prune(fx.store, statuses="failed")
    assert {k: v for k, v in real.to_dict().items() if k not in ("dry_run", "bytes_after", "bytes_before")} == \
           {k: v for k, v in dry.to_dict().items() if k not in ("dry_run", "bytes_after", "bytes_before")}
    after = fx.counts()
    assert after["runs"] == 1 and after["run_events"] == 2 and after["run_steps"] == 1
    assert after["calls"] == before["calls"] - 4


def test_child_runs_go_with_their_parent_and_are_never_selected_alone(fx):
    parent = fx.run("harness", "parent call", age_days=40)
    child_a = fx.run("harness-task", "child a call", parent=parent, events=3)
    child_b = fx.run("harness-task", "child b call", status="failed", parent=parent)
    grandchild = fx.run("harness-step", "grandchild call", parent=child_a)
    other = fx.run("harness", "other parent", age_days=1)
    other_child = fx.run("harness-task", "other child", status="failed", parent=other)
    tree_keys = fx.keys(parent) | fx.keys(child_a) | fx.keys(child_b) | fx.keys(grandchild)

    # a filter that only a child matches selects nothing: a child follows its parent, so a kept child keeps it
    assert prune(fx.store, statuses="failed", kinds="harness-task", dry_run=True).runs == 0
    assert prune(fx.store, statuses="failed", dry_run=True).runs == 0

    report = prune(fx.store, older_than="30d", now=NOW)
    assert report.run_ids == (parent,) and (report.runs, report.child_runs) == (4, 3)
    assert report.events == 3
    assert fx.run_ids() == {other, other_child}
    assert not tree_keys & fx.call_keys()
    assert fx.keys(other_child) <= fx.call_keys()


def test_a_running_run_is_never_pruned_nor_its_tree(fx):
    fx.run("select", "shared")
    live = open_run(fx.store, "select", "scripted", {})
    parent = fx.run("harness", "parent", age_days=40)
    live_child = open_run(fx.store, "harness-task", "scripted", {}, parent=parent)
    try:
        with live.current():
            fx.ex.run(_calls("shared", "live only"))
        live_keys = fx.keys(live.id)
        fx.date(live.id, 40)  # old, and still running
        report = prune(fx.store, older_than="30d", kinds=["select", "harness"], now=NOW)
        assert report.runs == 0 and report.running == 3  # the live run, and the parent with its live child
        assert {live.id, parent, live_child.id} <= fx.run_ids()
        assert fx.store.run(live.id).status == "running"
        assert live_keys <= fx.call_keys()
    finally:
        live.finish("ok", None)
        live_child.finish("ok", None)
    # ended: the parent goes with its child (the other run ended just now: not 30 days old)
    assert prune(fx.store, older_than="30d", now=NOW).run_ids == (parent,)
    assert fx.store.run(live_child.id) is None


def test_a_run_whose_process_died_is_settled_as_interrupted_and_can_be_pruned(fx):
    me = ProcessIdentity.current()
    gone = ProcessIdentity(me.host, me.boot_id, os.getpid(), (me.start or 0) + 12345)  # this pid, another start
    if gone.alive() or not me.same_machine():
        pytest.skip("no /proc here to tell a dead process from a live one")
    dead = fx.store.start_run("select", "scripted", {}, owner=gone)

    dry = prune(fx.store, statuses="interrupted", dry_run=True)
    assert dry.run_ids == (dead,) and fx.store.run(dead).status == "running"  # judged so, nothing written
    report = prune(fx.store, statuses="interrupted")
    assert report.run_ids == (dead,) and fx.store.run(dead) is None


def test_a_call_another_process_has_claimed_is_kept(fx):
    pruned = fx.run("score", "claimed", "not claimed", status="failed")
    claimed = next(k for k in fx.keys(pruned) if fx.store.call(k)["request"]["messages"][0]["content"].count("claimed")
                   and "not claimed" not in fx.store.call(k)["request"]["messages"][0]["content"])
    fx.store.execute("INSERT INTO call_leases (key, owner, expires_at, taken_at) VALUES (?, ?, ?, ?)",
                     (claimed, lease_owner(), NOW + 60, NOW))
    report = prune(fx.store, statuses="failed")
    assert report.calls == 1 and fx.call_keys() == {claimed}


def test_vacuum_shrinks_the_file_after_a_big_prune(fx):
    filler = "x" * 2000
    for n in range(40):
        fx.run("score", *(f"{filler} {n} {k}" for k in range(10)), status="failed", events=20)
    kept = fx.run("select", "small")
    fx.store.flush()
    grown = store_bytes(fx.store.path)
    report = prune(fx.store, statuses="failed")
    assert report.runs == 40 and report.calls == 400
    assert report.bytes_after >= grown // 2, "pruning alone leaves the file's pages free, not returned"

    vac = vacuum(fx.store)

    assert vac.bytes_before >= grown // 2
    assert vac.bytes_after < vac.bytes_before // 4
    assert vac.bytes_after == store_bytes(fx.store.path)
    assert fx.run_ids() == {kept} and fx.store.get_call(next(iter(fx.keys(kept)))) is not None
    fx.store.close()
    again = Store.open(fx.store.path)  # still a whole store
    assert again.run(kept).status == "ok"
    again.close()
    fx.store = Store.open(fx.store.path)


@pytest.mark.parametrize(("text", "seconds"), [("30d", 30 * DAY), ("12h", 43200), ("90m", 5400), ("45s", 45),
                                               ("45", 45), ("1.5h", 5400), ("2w", 14 * DAY), (" 7D ", 7 * DAY),
                                               (3600, 3600), (0, 0)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "abc", "30x", "-3d", "d", "3 days", "1e3d", float("nan"), -1])
def test_a_bad_duration_is_one_sentence_naming_the_flag(text):
    with pytest.raises(UserError) as err:
        parse_duration(text, "--older-than")
    message = str(err.value)
    assert "--older-than" in message and "\n" not in message and "30d" in message


def test_prune_needs_a_filter_and_never_takes_running(fx):
    fx.run("select", "a")
    with pytest.raises(UserError, match="at least one filter"):
        prune(fx.store)
    with pytest.raises(UserError, match="never pruned"):
        prune(fx.store, statuses=["running"])
    assert len(fx.run_ids()) == 1
