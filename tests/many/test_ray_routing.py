"""Prefix affinity across a Ray cluster: the desk decides where each prompt of a pool of endpoints
goes, from every worker's prompts, so one task's calls (which share their prefix) reach one
endpoint whichever worker sends them, and tasks that share nothing spread over the endpoints.

Without the desk, each decision's own pool would send its first prompt to the first endpoint, so
every task would land there: the test tells the two apart.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from tests.many.test_select_many_ray import REPO
from tests.support.ray_route_doubles import RouteLogModel, register_route_in_worker, seen
from tests.support.scripted_model import registered_scheme
from veriscale.data.pool import load_pool
from veriscale.engine.routing import EndpointPool
from veriscale.engine.store import Store
from veriscale.many.executors import RayExecutor
from veriscale.many.picks_file import PicksFile
from veriscale.many.select_many import jobs_of, select_many
from veriscale.selection.settings import SelectionSettings
from veriscale.verify.reward import Verifier

ray = pytest.importorskip("ray")  # the [ray] extra; CI installs it with [test]
WORDS = {"a": "alpha beta gamma delta", "b": "omega psi chi phi"}


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}})
    yield
    ray.shutdown()


def _pool(path: Path) -> Path:
    import json

    lines = []
    for task, words in WORDS.items():  # long task texts that share nothing: the prompts' prefixes differ
        text = f"Task {task}: " + " ".join(f"{words} {k}" for k in range(150))
        for r in range(3):
            lines.append({"id": f"{task}-r{r}", "task_id": task, "messages": [
                {"role": "user", "content": text},
                {"role": "assistant", "content": f"answer {r} of {task}" + (" GOOD" if r == 1 else "")}]})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_one_tasks_calls_reach_one_endpoint_from_any_worker_and_tasks_spread(local_ray, tmp_path: Path) -> None:
    from veriscale.many.ray_limits import DESK_NAME

    folder = tmp_path / "seen"
    folder.mkdir()
    with registered_scheme("routelog", RouteLogModel, ("routelog:NAME:DIR",)):
        backends = [RouteLogModel(f"routelog:e0:{folder}"), RouteLogModel(f"routelog:e1:{folder}")]
        verifier = Verifier(EndpointPool(backends, concurrency=2), store=Store.open(tmp_path / "s.sqlite3"),
                            criteria="general")
        report = select_many(jobs_of(load_pool([_pool(tmp_path / "pool.jsonl")])), verifier=verifier,
                             settings=SelectionSettings(method="round_robin"), picks=PicksFile(tmp_path / "picks.jsonl"),
                             at_once=2, executor=RayExecutor(setup=register_route_in_worker))
    assert report.decided == 2
    calls = seen(folder)
    assert not any(task == "?" for _, task in calls)
    endpoints = defaultdict(set)
    for endpoint, task in calls:
        endpoints[task].add(endpoint)
    assert set(endpoints) == {"a", "b"}
    assert all(len(where) == 1 for where in endpoints.values()), endpoints  # a task's prefix stays on one endpoint
    assert endpoints["a"] != endpoints["b"]  # and the two tasks spread over both
    routed = ray.get(ray.get_actor(DESK_NAME).routed_counts.remote(("routelog:e0", "routelog:e1")))
    # the desk decided each new prefix (both endpoints got one); a worker sent the rest of a task's
    # calls where its first went, without asking again
    assert min(routed) > 0 and sum(routed) < len(calls), (routed, len(calls))
