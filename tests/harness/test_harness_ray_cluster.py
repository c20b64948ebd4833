"""``harness run --executor ray`` on a simulated two-node cluster (``ray.cluster_utils.Cluster``), with
the jail on. The head node has no CPUs for tasks, so every task runs on the added worker node.

What this file proves:

- **Jailed sessions on a worker node give a local jailed run's outcomes.** Both fixture tasks run
  on the worker node (the chat double records the Ray node its session loop ran on) with the jail
  on; the picks equal a local jailed run's and the byte-stable files (``SAME_BYTES``) are identical.
- **The session really was jailed there.** Each task's resolver runs one shell command through its
  ``run`` tool. The transcript the driver got back shows that it ran as a non-root user, with the
  jail's ``$HOME``, as an early process of a fresh PID namespace, and without sight of a file the
  worker process itself could see (the control is recorded by the double outside the jail). Every
  outcome and the ``harness run`` record in the store say ``jail: on``.
- **Nothing is left only on the worker.** Every session's workspace, its deliverables, the delivery
  and its report (what the delivery restored, changed or added), the transcripts and the phase
  records are in the driver's run folder. The worker's scratch folder existed while the sessions
  ran (the double saw it) and is gone afterwards.
- **The per-node preflight names the node that lacks bubblewrap, before any work.** A third node
  joins with a ``PATH`` that has no ``bwrap``. All three nodes share one IP on a simulated cluster,
  so the refusal must name that node's Ray id, and only that node's. No run folder and no store
  are made.

The witness is event-based: the double appends a JSON line for every chat call it answers. The
test asserts on those lines and on files, never on wall-clock times.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.harness.test_harness_ray import SAME_BYTES, _files, _options, two_tasks  # noqa: F401 - a fixture
from tests.support.ray_harness_doubles import (
    BASES,
    PerTaskChat,
    register_in_worker,
    scripts,
)
from tests.support.scripted_chat import ScriptedChat, call, phase_of
from veriscale.engine.store import Store
from veriscale.errors import UserError
from veriscale.harness.jail.mounts import INSIDE_HOME
from veriscale.harness.protocol.layout import RunLayout
from veriscale.harness.protocol.protocol_runner import run_tasks

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")
REPO = Path(__file__).resolve().parents[2]
SCHEME = "harness-jailwitness"
#: the file the jailed command looks for, beside the witness folder: the worker sees it, a jailed session must not
HOST_ONLY = "host-only.txt"


def probe_command(folder: Path) -> str:
    """A shell line whose output tells a jailed session from an unjailed one (no varying numbers)."""
    secret = folder.parent / HOST_ONLY
    return ('[ "$(id -u)" -ne 0 ] && echo "uid: not root" || echo "uid: root"; echo "home: $HOME"; '
            'if [ $$ -lt 10 ]; then echo "pid: early"; else echo "pid: late"; fi; '
            f"if [ -e {secret} ]; then echo 'host file: seen'; else echo 'host file: hidden'; fi")


class JailWitnessChat(PerTaskChat):
    """TEST DOUBLE: the per-task scripted chat whose resolver first runs :func:`probe_command`. For every
    call it answers, it appends to ``FOLDER/<pid>.jsonl`` the Ray node it runs on, the phase and task,
    whether the worker process sees the host-only file, and the scratch folders the harness has here."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.folder = folder
        self.uri = f"{SCHEME}:{folder}"
        for task, base in BASES.items():
            steps = scripts(base)
            steps["resolve"].insert(0, call("run", command=probe_command(folder)))
            self.per_task[task] = ScriptedChat(steps)

    def chat(self, messages, **kwargs):
        node = ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
        scratch = Path(tempfile.gettempdir()) / "veriscale-harness"
        task = next(name for name in self.per_task if f"/{name}.runs/" in messages[0]["content"])
        line = {"pid": os.getpid(), "node": node, "phase": phase_of(messages), "task": task,
                "host_file_seen": (self.folder.parent / HOST_ONLY).exists(),
                "scratch": str(scratch), "scratch_keys": sorted(p.name for p in scratch.iterdir()) if scratch.is_dir() else []}
        with (self.folder / f"{os.getpid()}.jsonl").open("a") as witness:
            witness.write(json.dumps(line) + "\n")
        return super().chat(messages, **kwargs)


def register_witness_in_worker() -> None:
    from veriscale.models.registry import register_backend

    register_in_worker()
    register_backend((SCHEME,), lambda uri: JailWitnessChat(Path(uri.split(":", 1)[1])), forms=(f"{SCHEME}:DIR",))


@pytest.fixture(autouse=True)
def doubles_here():
    """The workers' test-double schemes known to the driver too, which checks a URI before any work."""
    from veriscale.models.registry import SCHEMES

    saved = dict(SCHEMES)
    register_witness_in_worker()
    yield
    SCHEMES.clear()
    SCHEMES.update(saved)


@pytest.fixture(scope="module")
def cluster():
    """A head node with no CPUs for tasks and one worker node with two (both tasks at once)."""
    if ray.is_initialized():  # another module's Ray instance
        ray.shutdown()
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    worker = cluster.add_node(num_cpus=2)
    try:
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False,
                 runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}})  # workers import tests.support
        cluster.wait_for_nodes()
        yield cluster, worker
    finally:
        ray.shutdown()
        cluster.shutdown()


def _witness(folder: Path) -> list[dict]:
    return [json.loads(line) for path in sorted(folder.glob("*.jsonl")) for line in path.read_text().splitlines()]


def _probe_output(run_dir: Path) -> str:
    """What the resolver's ``run`` call printed, from the transcript in ``run_dir``."""
    for line in (run_dir / "transcripts" / "resolve.jsonl").read_text().splitlines():
        event = json.loads(line)
        message = event.get("message") or {}
        if event.get("type") == "message" and message.get("role") == "tool" and message.get("name") == "run":
            return message["content"]
    raise AssertionError(f"no run tool result in {run_dir}/transcripts/resolve.jsonl")


def test_jailed_tasks_on_a_worker_node_match_a_local_jailed_run_and_come_back_whole(
        cluster, two_tasks: list[Path], tmp_path: Path) -> None:  # noqa: F811 - the imported fixture
    from veriscale.many.ray_harness import RayTasks

    _, worker = cluster
    folder = tmp_path / "witness"
    folder.mkdir()
    (tmp_path / HOST_ONLY).write_text("only the host may see this")
    uri = f"{SCHEME}:{folder}"
    here = run_tasks(two_tasks, dataclasses.replace(_options(tmp_path, "local", uri), no_jail=False),
                     backend=JailWitnessChat(folder))
    there = run_tasks(two_tasks, dataclasses.replace(_options(tmp_path, "ray", uri), no_jail=False),
                      remote=RayTasks(setup=register_witness_in_worker))

    assert here["failed"] == there["failed"] == 0 and here["jail"] == there["jail"] == "on"
    witness = _witness(folder)
    local_lines = [w for w in witness if w["pid"] == os.getpid()]
    remote_lines = [w for w in witness if w["pid"] != os.getpid()]
    # every session of the Ray run had its chat loop on the worker node, in a worker process
    assert remote_lines and {w["node"] for w in remote_lines} == {worker.node_id}
    assert {(w["task"], w["phase"]) for w in remote_lines} == {(w["task"], w["phase"]) for w in local_lines} == \
        {(t.name, p) for t in two_tasks for p in ("resolve", "challenge", "adjudicate")}
    assert all(w["host_file_seen"] for w in witness)  # control: outside the jail the file is there

    for mine, theirs in zip(here["tasks"], there["tasks"]):
        assert theirs["outcome"] == mine["outcome"] == "delivered"
        assert (theirs["task"], theirs["base"], theirs["revisions"], theirs["jail"]) == \
            (mine["task"], mine["base"], mine["revisions"], "on")
        local_dir, ray_dir = Path(mine["run_dir"]), Path(theirs["run_dir"])
        assert ray_dir == RunLayout.for_task(Path(mine["task_dir"]), "ray").root  # on the driver, where a local run writes
        local, remote = _files(local_dir), _files(ray_dir)
        assert set(remote) == set(local)
        for rel, data in local.items():
            if rel.startswith(SAME_BYTES):
                assert remote[rel] == data, rel
        # every session's workspace, the deliverables and the delivery report came back
        for phase in ("resolve", "challenge", "adjudicate"):
            assert any(rel.startswith(f"sessions/{phase}/") for rel in remote), phase
            assert f"transcripts/{phase}.jsonl" in remote and f"phases/{phase}.json" in remote
        assert any(rel.startswith("sessions/adjudicate/out/deliverables/") for rel in remote)
        assert any(rel.startswith("delivery/deliverables/") for rel in remote)
        delivery = json.loads(remote["delivery.json"])
        assert {"restored", "changed", "added"} <= set(delivery)
        assert json.loads(remote["outcome.json"])["jail"] == "on"
        # the jailed command ran as the jail's user, in its namespaces, blind to the host file
        expected = f"uid: not root\nhome: {INSIDE_HOME}\npid: early\nhost file: hidden\n"
        assert _probe_output(local_dir).endswith(expected)
        assert _probe_output(ray_dir).endswith(expected)
        # the worker's scratch folder for this task: used while its sessions ran, gone afterwards
        key = hashlib.sha256(str(ray_dir).encode()).hexdigest()[:20]
        seen = [w for w in remote_lines if w["task"] == theirs["task"]]
        assert all(key in w["scratch_keys"] for w in seen)
        scratch = {Path(w["scratch"]) / key for w in seen}
        assert scratch and not any(path.exists() for path in scratch)  # nothing is left only on the worker

    store = Store.open(tmp_path / "ray.sqlite3")
    rows, _ = store.execute("SELECT json_extract(args, '$.jail'), json_extract(args, '$.runs_on') FROM runs "
                            "WHERE command = 'harness run'")
    assert rows == [("on", "ray")]


def test_the_preflight_names_the_node_that_lacks_bubblewrap_before_any_work(
        cluster, two_tasks: list[Path], tmp_path: Path) -> None:  # noqa: F811 - the imported fixture
    from veriscale.many.ray_harness import RayTasks

    simulated, worker = cluster
    bwrap = shutil.which("bwrap")
    assert bwrap is not None  # the jail runs here (the first test needs it too)
    # the node's PATH: every program of this host's PATH but bwrap (Ray's workers start through bash)
    shims, path = tmp_path / "bin-without-bwrap", []
    shims.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        if not folder or not os.path.exists(os.path.join(folder, "bwrap")):
            path.append(folder)
            continue
        for program in Path(folder).iterdir():
            if program.name != "bwrap" and not os.path.lexists(shims / program.name):
                (shims / program.name).symlink_to(program)
        if str(shims) not in path:
            path.append(str(shims))
    bare = simulated.add_node(num_cpus=0, env_vars={"PATH": os.pathsep.join(path)})  # its workers find no bwrap
    try:
        simulated.wait_for_nodes()
        uri = f"{SCHEME}:{tmp_path}"
        with pytest.raises(UserError) as raised:
            run_tasks(two_tasks[:1], dataclasses.replace(_options(tmp_path, "pre", uri), no_jail=False),
                      remote=RayTasks(setup=register_witness_in_worker, preflight_timeout_s=90))
    finally:
        simulated.remove_node(bare)
    message = str(raised.value)
    assert "nothing was run" in message and "lacks the jail" in message and "bubblewrap ('bwrap') is not installed" in message
    assert message.count(" lacks ") == 1  # only that node: the head and the worker have bwrap
    assert f"Ray node {bare.node_id[:12]}" in message
    assert worker.node_id[:12] not in message and simulated.head_node.node_id[:12] not in message
    assert not (two_tasks[0].parent / "quarterly_report.runs").exists()
    assert not (tmp_path / "pre.sqlite3").exists()
