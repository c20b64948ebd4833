"""``select-many --executor ray`` on a simulated two-node cluster (``ray.cluster_utils.Cluster``):
the node running a decision is removed mid-task; the decision is asked again on a node that joined
meanwhile, seeded with the calls the driver committed, and the pick is the one the asyncio executor
makes. The head node has no CPUs for tasks, so every decision runs on a worker node."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.many.test_select_many import _write_pool
from tests.support.ray_doubles import register_stall_in_worker
from tests.support.scripted_model import ScriptedScoreModel
from veriscale.data.pool import load_pool
from veriscale.engine.store import Store
from veriscale.many.executors import RayExecutor
from veriscale.many.picks_file import PicksFile
from veriscale.many.select_many import jobs_of, select_many
from veriscale.selection.settings import SelectionSettings
from veriscale.verify.reward import Verifier

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")
REPO = Path(__file__).resolve().parents[2]
GUARD_S = 600


@pytest.fixture()
def two_nodes():
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    worker = cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}})
    cluster.wait_for_nodes()
    try:
        yield cluster, worker
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_a_node_removed_mid_task_loses_nothing_committed_and_the_pick_stands(two_nodes, tmp_path: Path) -> None:
    cluster, worker = two_nodes
    pool, folder = _write_pool(tmp_path / "pool.jsonl", tasks=("t1",)), tmp_path / "witness"
    folder.mkdir()
    committed = 0

    def on_call(_outcome) -> None:  # once the driver committed two calls and the worker stalls: take its node
        nonlocal committed
        committed += 1
        if committed == 2:
            deadline = time.monotonic() + GUARD_S  # a hang guard only: the worker reaches its 4th call next
            while not (folder / "stalled").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            cluster.add_node(num_cpus=1)
            cluster.remove_node(worker)

    model = ScriptedScoreModel()
    model.uri = f"stallonce:{folder}"
    executor = RayExecutor(setup=register_stall_in_worker)
    verifier = Verifier(model, store=Store.open(tmp_path / "s.sqlite3"), criteria="general", concurrency=1)
    report = select_many(jobs_of(load_pool([pool])), verifier=verifier, settings=SelectionSettings(method="round_robin"),
                         picks=PicksFile(tmp_path / "picks.jsonl"), executor=executor, on_call=on_call)
    assert executor.attempts["t1"] == 2 and report.decided == 1
    line = json.loads((tmp_path / "picks.jsonl").read_text())
    assert line["pick"] == "t1-r1"
    store = Store.open(tmp_path / "s.sqlite3")
    runs, _ = store.execute("SELECT id, status FROM runs WHERE command = 'select' ORDER BY id")
    assert [status for _, status in runs] == ["interrupted", "ok"]
    first, _ = store.execute("SELECT COUNT(*) FROM run_calls WHERE run_id = ? AND cache_hit = 0", (runs[0][0],))
    hits, _ = store.execute("SELECT COUNT(*) FROM run_calls WHERE run_id = ? AND cache_hit = 1", (runs[1][0],))
    assert first[0][0] >= 2 and hits[0][0] >= first[0][0]  # the retry took the committed calls from its seeds
