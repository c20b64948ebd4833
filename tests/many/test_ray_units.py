"""``bench`` and ``track`` with ``--executor ray``: each bench item and each trajectory's curve is a Ray
unit (``veriscale.many.units``), and the report and the curves are those of the local executor (exact
on the scripted doubles); a worker killed mid-unit is replaced without asking a committed call again;
and the worker's feed sends each written or changed call row once.

Workers load the scripted doubles through Ray's ``worker_process_setup_hook`` (the CLI starts its own
``RayExecutor``, with no ``setup``), tests/support/ray_doubles.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.support.ray_doubles import KillOnceProgressModel, ProgressUriModel, register_units_in_worker
from tests.support.scripted_model import ScriptedScoreModel, registered_scheme
from veriscale.data.model import Candidate, Step, Task, Trajectory
from veriscale.engine.run_scope import recorded_run
from veriscale.engine.store import Store
from veriscale.many.call_feed import CallFeed

import ray  # noqa: E402 - the [ray] extra; [test] installs it: without it this fails, never skips
REPO = Path(__file__).resolve().parents[2]
HOOK = "tests.support.ray_doubles.register_units_in_worker"
TIMING = {"wall_s", "latency_s"}  # what differs between any two runs


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}, "worker_process_setup_hook": HOOK})
    yield
    ray.shutdown()


@pytest.fixture()
def doubles():
    with registered_scheme("scripted", lambda uri: ScriptedScoreModel(), ("scripted",)), \
            registered_scheme("scripted-progress", lambda uri: ProgressUriModel(), ("scripted-progress",)):
        yield


def _untimed(value):
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _cli(*args: str) -> dict:
    from veriscale.cli import app

    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _pairs(path: Path) -> Path:
    rows = [{"id": f"p{i}", "instruction": f"Task {i}: fix the bug", "output_1": f"answer {i}" + (" GOOD" if i % 2 else ""),
             "output_2": f"other {i}" + ("" if i % 2 else " GOOD"), "label": 1 if i % 2 else 2} for i in range(3)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_bench_pairs_on_ray_reports_what_the_local_executor_reports(local_ray, doubles, tmp_path: Path) -> None:
    pairs = _pairs(tmp_path / "pairs.jsonl")
    reports = {}
    for executor in ("local", "ray"):
        reports[executor] = _cli("bench", str(pairs), "--limit", "0", "--yes", "--discrete-vs-continuous",
                                 "--criterion", "Correctness", "--model", "scripted", "--json", "--executor", executor,
                                 "--store", str(tmp_path / f"{executor}.sqlite3"))
    here, there = reports["local"], reports["ray"]
    assert _untimed(there) == _untimed({**here, "run_id": there["run_id"]})
    continuous, discrete = there["rows"]
    assert continuous["usage"]["model_calls"] > 0  # the discrete twin took every call from its seeds
    assert discrete["usage"]["model_calls"] == 0 and discrete["usage"]["cache_hits"] == continuous["usage"]["model_calls"]
    store = Store.open(tmp_path / "ray.sqlite3")  # the driver committed and linked every call
    linked = {c["key"] for c in store.run_calls(there["run_id"])}
    assert len(linked) == continuous["usage"]["model_calls"] == store.count_calls("ok")


def test_bench_pools_on_ray_give_the_rows_of_the_local_executor(local_ray, doubles, tmp_path: Path) -> None:
    from veriscale.bench.bench_runner import Bench, BenchConfig
    from veriscale.bench.datasets import LabelledPool
    from veriscale.many.executors import RayExecutor
    from veriscale.selection.settings import SelectionSettings

    pools = [LabelledPool(f"t{t}", Task(f"Task {t}", id=f"t{t}"),
                          [Candidate(id=f"t{t}-r{r}", text=f"run {r}" + (" GOOD" if r == t % 3 else "")) for r in range(3)],
                          [1.0 if r == t % 3 else 0.0 for r in range(3)]) for t in range(2)]
    rows = {}
    for name, executor in (("local", None), ("ray", RayExecutor(setup=register_units_in_worker))):
        bench = Bench(ScriptedScoreModel(), Store.open(tmp_path / f"{name}.sqlite3"),
                      SelectionSettings(method="round_robin", criteria="general"), executor=executor)
        with recorded_run(bench.store, "bench", bench.model.uri, {}):
            rows[name] = [r.to_dict() for r in bench.run_pools(pools, [BenchConfig(scale="letters")])]
    assert _untimed(rows["ray"]) == _untimed(rows["local"])
    assert rows["ray"][0]["metrics"]["selected"] == 1.0


def _trajectory(path: Path, name: str, words: list[str]) -> Path:
    path.write_text(json.dumps({"id": name, "problem": "Reach the goal.", "steps": words, "label": 1}) + "\n")
    return path


def test_track_on_ray_draws_the_curves_the_local_executor_draws(local_ray, doubles, tmp_path: Path) -> None:
    files = [str(_trajectory(tmp_path / f"{name}.jsonl", name, words)) for name, words in (
        ("rise", ["UP", "x", "UP", "UP", "y"]), ("fall", ["UP", "UP", "DOWN", "DOWN", "z"]),
        ("flat", ["a", "b", "c", "d", "UP"]))]
    curves = {}
    for executor in ("local", "ray"):
        curves[executor] = _cli("track", *files, "--model", "scripted-progress", "--json", "--executor", executor,
                                "--store", str(tmp_path / f"{executor}.sqlite3"))
    here, there = curves["local"], curves["ray"]
    assert len(there["curves"]) == 3
    assert _untimed(there) == _untimed({**here, "run_id": there["run_id"]})
    assert [[p["value"] for p in c["points"]] for c in there["curves"]][0] == [0.25, 0.25, 0.5, 0.75, 0.75]
    store, local = Store.open(tmp_path / "ray.sqlite3"), Store.open(tmp_path / "local.sqlite3")
    # 15 checkpoints, rise and fall share their first prompt: asked once, as here, and linked to the run
    assert len({c["key"] for c in store.run_calls(there["run_id"])}) == 14 == store.count_calls("ok")
    assert local.count_calls("ok") == 14


def test_a_worker_killed_mid_unit_is_replaced_and_no_committed_call_is_asked_again(local_ray, tmp_path: Path) -> None:
    from veriscale.many.executors import RayExecutor
    from veriscale.progress.offline_track import track, track_unit
    from veriscale.progress.progress_judge import ProgressJudge

    folder = tmp_path / "witness"
    folder.mkdir()
    words = ["UP", "x", "UP", "DOWN", "UP", "UP", "y", "UP"]
    cand = Candidate(id="run", trajectory=Trajectory([Step(role="agent", text=w) for w in words]),
                     task=Task("Reach the goal."))
    committed, committed_first = 0, set()
    executor = RayExecutor(setup=register_units_in_worker)
    judge = ProgressJudge(KillOnceProgressModel(folder), store=Store.open(tmp_path / "s.sqlite3"), concurrency=1)

    def on_call(_outcome) -> None:  # the driver committed a call: once two are in, let the worker die
        nonlocal committed
        committed += 1
        if executor.attempts["track:0:run"] == 1:  # what the driver holds from the first worker
            rows, _ = judge.executor.store.execute("SELECT request FROM calls WHERE status = 'ok'")
            committed_first.update(json.dumps(json.loads(r), sort_keys=True) for (r,) in rows)
        if committed == 2:
            (folder / "go").write_text("")

    unit = track_unit("track:0:run", None, cand, list(range(1, 9)), judge_options={}, watch={})
    with recorded_run(judge.executor.store, "track", judge.model.uri, {}) as run:
        from veriscale.engine import sync_edge

        curve, _ = sync_edge.run(executor.run_unit(unit, source=judge, run_id=run.id, on_call=on_call))
    assert (folder / "killed").exists() and executor.attempts["track:0:run"] == 2
    local = track(None, cand, list(range(1, 9)), judge=ProgressJudge(ProgressUriModel()))
    assert curve.values() == local.values() and curve.steps() == local.steps()
    store = Store.open(tmp_path / "s.sqlite3")
    dead = (folder / "killed").read_text()
    asked_first = set((folder / f"asked-{dead}.txt").read_text().splitlines())
    assert len(committed_first) >= 2 and committed_first <= asked_first  # what the driver received from the dead worker
    rows, _ = store.execute("SELECT request FROM calls WHERE status = 'ok'")
    stored = {json.dumps(json.loads(r), sort_keys=True) for (r,) in rows}
    asked_later = {line for f in folder.glob("asked-*.txt") if f.name != f"asked-{dead}.txt"
                   for line in f.read_text().splitlines()}
    assert asked_later and not committed_first & asked_later  # the new worker took those from its seeds
    assert len(stored) == 8 and len({c["key"] for c in store.run_calls(run.id)}) == 8


def _put(store: Store, key: str, status: str) -> None:
    store.put_call(key, model="m", fingerprint="f", prompt_version="v", request={"k": key}, status=status,
                   response={"ok": True} if status == "ok" else None, error=None if status == "ok" else "no")


class _FinishesBetweenReads:
    """The feed's store, except that right after the feed's first read (links or change log, whichever
    it reads first) one more call finishes: its row and its link land between the feed's two reads,
    the race the read order is for."""

    def __init__(self, store: Store, run_id: int) -> None:
        self.store, self.run_id, self.armed = store, run_id, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def execute(self, sql: str, params: tuple = ()) -> Any:
        done = self.store.execute(sql, params)
        if self.armed and ("FROM run_calls" in sql or "FROM feed_log" in sql):
            self.armed = False
            _put(self.store, "late", "ok")
            self.store.link_call(self.run_id, "late", cache_hit=False)
        return done


def test_a_call_finishing_between_the_feeds_reads_never_arrives_linked_without_its_row(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "scratch.sqlite3")
    with recorded_run(store, "unit", "m", {}) as run:
        racing = _FinishesBetweenReads(store, run.id)
        feed = CallFeed(racing, run.id)
        _put(store, "k1", "ok")
        store.link_call(run.id, "k1", cache_hit=False)
        racing.armed = True
        sent = [feed.new(), feed.new()]
    assert not racing.armed  # the call did finish between the two reads of the first batch
    rows_so_far: set[str] = set()
    for batch in sent:  # what the driver commits: a batch's rows, then its links
        rows_so_far |= {c["key"] for c in batch["calls"]}
        for link in batch["links"]:
            assert link["key"] in rows_so_far, f"{link['key']} arrived linked before its row"
    assert [link["key"] for batch in sent for link in batch["links"]] == ["k1", "late"]


def test_the_feed_sends_each_written_or_changed_row_once(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "scratch.sqlite3")
    _put(store, "seed", "ok")  # in the store before the feed: the driver has it
    _put(store, "again", "failed")
    with recorded_run(store, "unit", "m", {}) as run:
        feed = CallFeed(store, run.id)
        assert feed.new() == {"calls": [], "links": []} and feed.rows_read == 0
        _put(store, "k1", "ok")
        _put(store, "k2", "failed")
        store.link_call(run.id, "k1", cache_hit=False)
        sent = feed.new()
        assert [(c["key"], c["status"]) for c in sent["calls"]] == [("k1", "ok"), ("k2", "failed")]
        assert sent["links"] == [{"key": "k1", "cache_hit": False, "label": None}]
        assert feed.new() == {"calls": [], "links": []} and feed.rows_read == 2
        rowid_before, _ = store.execute("SELECT rowid FROM calls WHERE key = 'again'")
        _put(store, "again", "ok")  # updated in place: the same rowid, sent once more
        _put(store, "k2", "ok")
        rowid_after, _ = store.execute("SELECT rowid FROM calls WHERE key = 'again'")
        assert rowid_before == rowid_after
        sent = feed.new()
        assert [(c["key"], c["status"], c["response"]) for c in sent["calls"]] == [("again", "ok", {"ok": True}),
                                                                                   ("k2", "ok", {"ok": True})]
        assert feed.new()["calls"] == [] and feed.rows_read == 4  # every row read once per change, never again


def test_the_executor_flags_are_checked_in_one_sentence_before_any_work(tmp_path: Path) -> None:
    from veriscale.cli import app

    pairs, traj = _pairs(tmp_path / "pairs.jsonl"), _trajectory(tmp_path / "t.jsonl", "t", ["UP", "x"])
    for args, words in (
            (["bench", str(pairs), "--address", "10.0.0.5:6379"], ("--address", "--executor ray")),
            (["bench", str(pairs), "--executor", "spark"], ("--executor spark", "local or ray")),
            (["bench", "--progress", str(traj), "--executor", "ray"], ("--executor ray", "progress bench")),
            (["track", str(traj), "--executor", "dask"], ("--executor dask", "local or ray")),
            (["track", "--follow", str(traj), "--executor", "ray"], ("--executor ray", "followed run"))):
        result = CliRunner().invoke(app, [*args, "--store", str(tmp_path / "s.sqlite3")])
        assert result.exit_code == 2, result.output
        assert all(w in result.output for w in words), result.output
