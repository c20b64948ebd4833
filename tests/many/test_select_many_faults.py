"""Faults during select-many are reported per task in picks.jsonl, never as a pick: an endpoint
that goes down mid-run (a real HTTP server on 127.0.0.1, shut down after the first task), an
endpoint slower than the call deadline, and on Ray a worker that dies on every attempt (as one the
memory monitor kills would). The tasks decided before the fault keep their picks, and a rerun once
the endpoint is back decides only the rest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.many.test_select_many import _write_pool
from tests.support.fault_server import FaultServer
from veriscale.data.pool import load_pool
from veriscale.engine.store import Store
from veriscale.many.picks_file import PicksFile
from veriscale.many.select_many import jobs_of, select_many
from veriscale.models.openai_compat import OpenAICompatModel
from veriscale.selection.settings import SelectionSettings
from veriscale.verify.reward import Verifier


def _select(url: str, pool: Path, picks: Path, store: Path, *, timeout_s: float = 30.0, on_done=None, executor=None):
    model = OpenAICompatModel(url, model="judge", max_retries=1, backoff_s=0.01, timeout_s=timeout_s)
    verifier = Verifier(model, store=Store.open(store), criteria="general")
    return select_many(jobs_of(load_pool([pool])), verifier=verifier, settings=SelectionSettings(method="round_robin"),
                       picks=PicksFile(picks), on_done=on_done, executor=executor)


def _lines(path: Path) -> dict[str, dict]:
    return {line["task"]: line for line in map(json.loads, path.read_text().splitlines())}


def test_an_endpoint_that_goes_down_mid_run_fails_the_later_tasks_and_a_rerun_decides_only_them(tmp_path: Path) -> None:
    pool, picks, store = _write_pool(tmp_path / "pool.jsonl", tasks=("t1", "t2")), tmp_path / "p.jsonl", tmp_path / "s.db"
    server = FaultServer(varied=True).__enter__()

    def went_down(record) -> None:  # the endpoint goes away once the first task is decided
        if record.task == "t1":
            server.__exit__()

    report = _select(server.url, pool, picks, store, on_done=went_down)
    lines = _lines(picks)
    assert (report.decided, report.failed) == (1, 1)
    assert lines["t1"]["pick"] is not None and lines["t1"]["error"] is None
    assert lines["t2"]["pick"] is None and lines["t2"]["confidence"] is None
    assert "cannot reach" in lines["t2"]["error"] and "rerun" in lines["t2"]["error"]

    with FaultServer(varied=True) as back:  # the endpoint is back (at a new port: the same model and weights)
        again = _select(back.url, pool, picks, store)
    assert (again.skipped, again.decided, again.failed) == (["t1"], 1, 0)
    assert _lines(picks)["t2"]["pick"] is not None


def test_an_endpoint_slower_than_the_deadline_fails_its_task_not_as_a_pick(tmp_path: Path) -> None:
    pool, picks = _write_pool(tmp_path / "pool.jsonl", tasks=("t1",)), tmp_path / "p.jsonl"
    with FaultServer(varied=True, delay_s=5.0) as slow:
        report = _select(slow.url, pool, picks, tmp_path / "s.db", timeout_s=0.2)
    line = _lines(picks)["t1"]
    assert (report.decided, report.failed) == (0, 1)
    assert line["pick"] is None and line["ranking"] == [] and line["error"]


def test_a_ray_worker_that_dies_on_every_attempt_is_an_error_line_naming_it(tmp_path: Path) -> None:
    ray = pytest.importorskip("ray")  # the [ray] extra; CI installs it with [test]
    from tests.many.test_select_many_ray import REPO
    from tests.support.ray_fault_doubles import register_in_worker
    from tests.support.scripted_model import ScriptedScoreModel, registered_scheme
    from veriscale.many.executors import RayExecutor

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}})
    try:
        pool, picks = _write_pool(tmp_path / "pool.jsonl", tasks=("t1",)), tmp_path / "p.jsonl"
        model = ScriptedScoreModel()
        model.uri = "memhog:"  # each worker's first call runs it out of memory (tests/support/ray_fault_doubles.py)
        with registered_scheme("memhog", lambda u: ScriptedScoreModel(), ("memhog:",)):
            verifier = Verifier(model, store=Store.open(tmp_path / "s.db"), criteria="general")
            executor = RayExecutor(setup=register_in_worker, retries=1)
            report = select_many(jobs_of(load_pool([pool])), verifier=verifier,
                                 settings=SelectionSettings(method="round_robin"), picks=PicksFile(picks),
                                 executor=executor)
    finally:
        ray.shutdown()
    line = _lines(picks)["t1"]
    assert (report.decided, report.failed) == (0, 1) and executor.attempts["t1"] == 2
    assert line["pick"] is None and "lost 2 times" in line["error"] and "out of memory" in line["error"]
