"""TEST DOUBLES for the Ray executor's workers: registered in each worker process by
:func:`register_in_worker` (the executor's ``setup``), since a worker imports veriscale afresh.

- ``scripted``: the scripted scoring double (grades by the word GOOD).
- ``killonce:FOLDER``: the same, but the first worker to reach its 4th call writes ``FOLDER/killed``,
  waits for ``FOLDER/go`` (the test writes it once the driver has committed calls of the task) and
  exits the process at once, as a worker killed mid-task would. Every call a worker is asked is
  appended to ``FOLDER/asked-<pid>.txt`` (the request as its cache key sees it, JSON, one a line).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from tests.support.scripted_model import ScriptedScoreModel

GUARD_S = 600  # a hang guard only: the wait ends when the test writes its go file


class KillOnceModel(ScriptedScoreModel):
    """TEST DOUBLE: the scripted model whose first worker dies mid-task (module docstring)."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.folder = folder
        self.count = 0
        self.lock = threading.Lock()

    def fingerprint(self) -> str:
        return "scripted:v1"  # the same cache keys as the plain double

    def score(self, request):
        with self.lock:
            self.count += 1
            nth = self.count
            with (self.folder / f"asked-{os.getpid()}.txt").open("a") as log:
                log.write(json.dumps(request.to_dict(), sort_keys=True) + "\n")
        killed = self.folder / "killed"
        if nth == 4 and not killed.exists():
            killed.write_text(str(os.getpid()))
            deadline = time.monotonic() + GUARD_S
            while not (self.folder / "go").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            os._exit(1)
        return super().score(request)


def register_in_worker() -> None:
    from veriscale.models.registry import register_backend

    register_backend(("scripted",), lambda uri: ScriptedScoreModel(), forms=("scripted",))
    register_backend(("killonce",), lambda uri: KillOnceModel(Path(uri.split(":", 1)[1])), forms=("killonce:DIR",))


class CrowdModel(ScriptedScoreModel):
    """TEST DOUBLE: the scripted model whose calls hold on until either more calls than the endpoint's
    cap are in flight at once (the cluster's limit failed) or the limit holds a call back at the desk;
    the named ``crowd-witness`` actor counts the calls in flight across every worker."""

    def __init__(self, uri: str, cap: int) -> None:
        super().__init__()
        self.uri, self.cap = uri, cap

    def score(self, request):
        import ray

        from veriscale.many.ray_limits import DESK_NAME, limit_key

        witness, desk = ray.get_actor("crowd-witness"), ray.get_actor(DESK_NAME)
        ray.get(witness.enter.remote())
        try:
            deadline = time.monotonic() + GUARD_S
            while time.monotonic() < deadline:
                in_flight, released = ray.get(witness.state.remote())
                if released:
                    break
                at_desk = ray.get(desk.state.remote(limit_key(self)))
                if in_flight > self.cap or (at_desk["held"] >= self.cap and at_desk["waiting"] >= 1):
                    ray.get(witness.release.remote())
                    break
                time.sleep(0.005)
            return super().score(request)
        finally:
            ray.get(witness.exit.remote())


class CrowdWitness:
    """Calls in flight across the cluster, and their peak (the body of the ``crowd-witness`` actor)."""

    def __init__(self) -> None:
        self.in_flight = self.peak = 0
        self.released = False

    def enter(self) -> None:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)

    def exit(self) -> None:
        self.in_flight -= 1

    def state(self) -> tuple[int, bool]:
        return self.in_flight, self.released

    def release(self) -> None:
        self.released = True

    def peak_seen(self) -> int:
        return self.peak


def register_crowd_in_worker() -> None:
    from veriscale.models.registry import register_backend

    register_in_worker()
    register_backend(("crowd",), lambda uri: CrowdModel(uri, int(uri.split(":", 1)[1])), forms=("crowd:CAP",))


class StallOnceModel(ScriptedScoreModel):
    """TEST DOUBLE: the scripted model whose first worker, at its 4th call, writes ``FOLDER/stalled``
    and waits there until its node is taken away (the test removes it); later workers answer."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.folder, self.count, self.lock = folder, 0, threading.Lock()

    def score(self, request):
        with self.lock:
            self.count += 1
            nth = self.count
        stalled = self.folder / "stalled"
        if nth == 4 and not stalled.exists():
            stalled.write_text(str(os.getpid()))
            deadline = time.monotonic() + GUARD_S
            while time.monotonic() < deadline:  # the node's removal ends this process
                time.sleep(0.05)
        return super().score(request)


def register_stall_in_worker() -> None:
    from veriscale.models.registry import register_backend

    register_in_worker()
    register_backend(("stallonce",), lambda uri: StallOnceModel(Path(uri.split(":", 1)[1])), forms=("stallonce:DIR",))


# -- units of bench and track (tests/many/test_ray_units.py) ---------------------------------------
from tests.support.scripted_progress import ScriptedProgressModel  # noqa: E402


class ProgressUriModel(ScriptedProgressModel):
    """TEST DOUBLE: the scripted progress double under a URI a worker loads it from (``scripted-progress``)."""

    uri = "scripted-progress"


class KillOnceProgressModel(ProgressUriModel):
    """TEST DOUBLE: the scripted progress double whose first worker dies at its 4th call, as
    :class:`KillOnceModel` does (``killonce-progress:FOLDER``; ``FOLDER/asked-<pid>.txt`` logs the calls)."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.uri = f"killonce-progress:{folder}"
        self.folder, self.count, self.lock = folder, 0, threading.Lock()

    def score(self, request):
        with self.lock:
            self.count += 1
            nth = self.count
            with (self.folder / f"asked-{os.getpid()}.txt").open("a") as log:
                log.write(json.dumps(request.to_dict(), sort_keys=True) + "\n")
        killed = self.folder / "killed"
        if nth == 4 and not killed.exists():
            killed.write_text(str(os.getpid()))
            deadline = time.monotonic() + GUARD_S
            while not (self.folder / "go").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            os._exit(1)
        return super().score(request)


def register_units_in_worker() -> None:
    """The scripted doubles and the progress ones (a Ray ``worker_process_setup_hook``, or ``setup``)."""
    from veriscale.models.registry import register_backend

    register_in_worker()
    register_backend(("scripted-progress",), lambda uri: ProgressUriModel(), forms=("scripted-progress",))
    register_backend(("killonce-progress",), lambda uri: KillOnceProgressModel(Path(uri.split(":", 1)[1])),
                     forms=("killonce-progress:DIR",))
