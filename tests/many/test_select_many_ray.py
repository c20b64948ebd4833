"""``select-many --executor ray`` on a local Ray instance: the same picks and probabilities as the
asyncio executor (exact on the scripted test double), the driver the store's only writer, and a
worker killed mid-task asked again elsewhere without repeating a call the driver had committed.

Workers load the scripted doubles through the executor's ``setup`` (tests/support/ray_doubles.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.many.test_select_many import _write_pool
from tests.support.ray_doubles import register_in_worker
from tests.support.scripted_model import ScriptedScoreModel, registered_scheme
from veriscale.data.pool import load_pool
from veriscale.engine.store import Store
from veriscale.many.executors import RayExecutor
from veriscale.many.picks_file import PicksFile
from veriscale.many.select_many import jobs_of, select_many
from veriscale.selection.settings import SelectionSettings
from veriscale.verify.reward import Verifier

ray = pytest.importorskip("ray")  # the [ray] extra; CI installs it with [test]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}})  # workers import tests.support
    yield
    ray.shutdown()


def _decide(pool: Path, out: Path, store: Path, model, executor=None, **kw):
    verifier = Verifier(model, store=Store.open(store), criteria="general")
    report = select_many(jobs_of(load_pool([pool])), verifier=verifier, settings=SelectionSettings(method="round_robin"),
                         picks=PicksFile(out), executor=executor, **kw)
    return report, {line["task"]: line for line in map(json.loads, out.read_text().splitlines())}


def test_ray_gives_the_picks_and_scores_the_asyncio_executor_gives(local_ray, tmp_path: Path) -> None:
    pool = _write_pool(tmp_path / "pool.jsonl")
    _, here = _decide(pool, tmp_path / "here.jsonl", tmp_path / "here.sqlite3", ScriptedScoreModel())
    with registered_scheme("scripted", lambda uri: ScriptedScoreModel(), ("scripted",)):
        executor = RayExecutor(setup=register_in_worker)
        report, there = _decide(pool, tmp_path / "ray.jsonl", tmp_path / "ray.sqlite3", ScriptedScoreModel(),
                                executor, at_once=2)
    assert report.decided == 3
    assert executor.committed == {}  # a finished decision's call keys leave the driver's memory
    for task, line in here.items():
        other = there[task]
        assert (other["pick"], other["ranking"], other["confidence"]) == (line["pick"], line["ranking"], line["confidence"])
        assert other["cost"]["model_calls"] == line["cost"]["model_calls"]
    store = Store.open(tmp_path / "ray.sqlite3")
    for task, line in there.items():  # the driver committed and linked every call of each decision
        run = store.run(line["run_id"])
        assert run is not None and run.status == "ok" and run.result["best"]["id"] == line["pick"]
        assert len({c["key"] for c in store.run_calls(run.id)}) == line["cost"]["model_calls"]


def test_a_worker_killed_mid_task_is_replaced_and_no_committed_call_is_asked_again(local_ray, tmp_path: Path) -> None:
    pool, folder = _write_pool(tmp_path / "pool.jsonl", tasks=("t1",)), tmp_path / "witness"
    folder.mkdir()
    committed = 0

    def on_call(_outcome) -> None:  # the driver committed a call: once two are in, let the worker die
        nonlocal committed
        committed += 1
        if committed == 2:
            (folder / "go").write_text("")

    uri = f"killonce:{folder}"
    executor = RayExecutor(setup=register_in_worker)
    with registered_scheme("killonce", lambda u: ScriptedScoreModel(), ("killonce:DIR",)):
        model = ScriptedScoreModel()
        model.uri = uri
        report, lines = _decide(pool, tmp_path / "picks.jsonl", tmp_path / "s.sqlite3", model, executor,
                                on_call=on_call)
    assert (folder / "killed").exists() and executor.attempts["t1"] == 2
    assert report.decided == 1 and lines["t1"]["pick"] == "t1-r1"
    store = Store.open(tmp_path / "s.sqlite3")
    runs, _ = store.execute("SELECT id, status FROM runs WHERE command = 'select' ORDER BY id")
    assert [status for _, status in runs] == ["interrupted", "ok"]
    rows, _ = store.execute("SELECT c.request FROM run_calls rc JOIN calls c ON c.key = rc.call_key "
                            "WHERE rc.run_id = ? AND c.status = 'ok'", (runs[0][0],))
    committed_first = {json.dumps(json.loads(r), sort_keys=True) for (r,) in rows}
    assert committed_first  # what the driver received from the dead worker was committed
    dead = (folder / "killed").read_text()
    asked_later = {line for f in folder.glob("asked-*.txt") if f.name != f"asked-{dead}.txt"
                   for line in f.read_text().splitlines()}
    assert asked_later and not committed_first & asked_later  # the new worker took those from its seeds


def test_the_cluster_never_has_more_calls_in_flight_than_the_endpoints_concurrency(local_ray, tmp_path: Path) -> None:
    from tests.support.ray_doubles import CrowdWitness, register_crowd_in_worker
    from veriscale.many.ray_limits import DESK_NAME

    witness = ray.remote(CrowdWitness).options(name="crowd-witness").remote()
    pool = _write_pool(tmp_path / "pool.jsonl", tasks=("t1", "t2", "t3"))
    model = ScriptedScoreModel()
    model.uri = "crowd:2"  # the workers' model: calls wait until the limit holds one back at the desk
    verifier = Verifier(model, store=Store.open(tmp_path / "s.sqlite3"), criteria="general", concurrency=2)
    report = select_many(jobs_of(load_pool([pool])), verifier=verifier, settings=SelectionSettings(method="round_robin"),
                         picks=PicksFile(tmp_path / "picks.jsonl"), at_once=3,
                         executor=RayExecutor(setup=register_crowd_in_worker))
    assert report.decided == 3
    assert ray.get(witness.peak_seen.remote()) == 2  # three tasks at once, yet never more than 2 calls in flight
    assert ray.get(ray.get_actor(DESK_NAME).state.remote("crowd:2"))["peak"] == 2
    ray.kill(witness)


def test_the_command_on_ray_picks_what_it_picks_here_from_a_real_llama_server(local_ray, llama_server,
                                                                             tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tests.support.llama_server import MODEL_ID
    from veriscale.cli import app

    pool = _write_pool(tmp_path / "pool.jsonl", tasks=("t1", "t2"))
    lines = {}
    for executor in ("local", "ray"):  # one call at a time each: the server sees the same calls in the same order
        out = tmp_path / f"{executor}.jsonl"
        result = CliRunner().invoke(app, ["select-many", str(pool), "-o", str(out), "--executor", executor,
                                          "--model", f"{llama_server}#{MODEL_ID}", "--concurrency", "1",
                                          "--tasks-at-once", "1", "-k", "1", "--store",
                                          str(tmp_path / f"{executor}.sqlite3"), "--json"])
        assert result.exit_code == 0, result.output
        lines[executor] = {line["task"]: line for line in map(json.loads, out.read_text().splitlines())}
    for task, here in lines["local"].items():
        there = lines["ray"][task]
        assert (there["pick"], there["ranking"]) == (here["pick"], here["ranking"])
        assert abs(there["confidence"] - here["confidence"]) <= 1e-6
        assert there["cost"]["model_calls"] == here["cost"]["model_calls"] > 0
