"""TEST DOUBLES for a ``select-many --executor ray`` driver killed mid-run and started again.

- ``holdonce:FOLDER:GENERATION``: the scripted scoring double (its cache keys), which logs every
  call it is asked to ``FOLDER/asked-GENERATION.txt`` (the request as its cache key sees it, JSON,
  one a line). In the first generation, the 3rd call of task ``t2`` writes ``FOLDER/holding`` and
  waits there (for its process to be killed with the driver: the test kills the driver).
- :func:`main`: the driver, run as ``python -m tests.support.ray_restart_doubles ADDRESS POOL PICKS
  STORE FOLDER GENERATION``: one select-many run on the Ray cluster at ADDRESS.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

from tests.support.scripted_model import ScriptedScoreModel

GUARD_S = 600  # a hang guard only: the driver's death ends the wait


class HoldOnceModel(ScriptedScoreModel):
    """TEST DOUBLE: the scripted model whose first generation stops at task t2's 3rd call (module docstring)."""

    def __init__(self, uri: str) -> None:
        super().__init__()
        _, folder, generation = uri.rsplit(":", 2)
        self.uri, self.folder, self.generation = uri, Path(folder), int(generation)
        self.t2_calls, self.lock = 0, threading.Lock()

    def fingerprint(self) -> str:
        return "scripted:v1"

    def score(self, request):
        text = request.messages[-1].content
        with self.lock:
            with (self.folder / f"asked-{self.generation}.txt").open("a") as log:
                log.write(json.dumps(request.to_dict(), sort_keys=True) + "\n")
            if "Task t2:" in text:
                self.t2_calls += 1
            nth = self.t2_calls if "Task t2:" in text else 0
        if self.generation == 1 and nth == 3:
            (self.folder / "holding").write_text("")
            deadline = time.monotonic() + GUARD_S
            while time.monotonic() < deadline:
                time.sleep(0.05)
        return super().score(request)


def register_in_worker() -> None:
    from veriscale.models.registry import register_backend

    register_backend(("holdonce",), HoldOnceModel, forms=("holdonce:DIR:GEN",))


def main(address: str, pool: str, picks: str, store: str, folder: str, generation: str) -> int:
    from veriscale.data.pool import load_pool
    from veriscale.engine.store import Store
    from veriscale.many.executors import RayExecutor
    from veriscale.many.picks_file import PicksFile
    from veriscale.many.select_many import jobs_of, select_many
    from veriscale.selection.settings import SelectionSettings
    from veriscale.verify.reward import Verifier

    register_in_worker()
    model = HoldOnceModel(f"holdonce:{folder}:{generation}")
    verifier = Verifier(model, store=Store.open(Path(store)), criteria="general")
    report = select_many(jobs_of(load_pool([Path(pool)])), verifier=verifier,
                         settings=SelectionSettings(method="round_robin"), picks=PicksFile(Path(picks)), at_once=1,
                         executor=RayExecutor(address=address, setup=register_in_worker, runtime_env={
                             "env_vars": {"PYTHONPATH": str(Path(__file__).resolve().parents[2])}}))
    print(json.dumps(report.to_dict()))
    return 0 if report.failed == 0 else 3


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
