"""``veriscale harness run --executor ray [--address ADDR]``: each task of the run is a Ray task.

    remote = RayTasks(address=None)                 # a local Ray instance; "HOST:PORT" or "auto" for a cluster
    summary = run_tasks(task_dirs, options, remote=remote)

- **Preflight, before any work.** :meth:`RayTasks.start` joins the cluster (an address nothing
  answers at is one sentence) and runs a small check pinned to every alive node
  (``NodeAffinitySchedulingStrategy``, ``soft=False``): the jail unless it is off, the agent's CLI
  (``pi``: its npm package and Node.js), an HTTP model endpoint reachable from there. A node that lacks
  something is one sentence naming the node's IP, what it lacks and how to fix it; nothing runs.
- **The payload.** The task folder (plain files once materialised) is packed in memory
  (:mod:`veriscale.many.run_folder_transfer`) with the run folder so far (a resumed run), the
  user's skill folders, the protocol's configuration, the command's settings and the calls the driver
  already committed for the task; a worker needs no shared file system.
- **The driver is the store's only writer.** The worker (:mod:`veriscale.many.ray_harness_worker`)
  runs the protocol over a scratch store and streams its finished calls back as they land; the driver
  commits them (:func:`veriscale.many.ray_worker.put_rows`) and links them to the task's
  ``harness task`` run.
- **The run folder comes back whole.** When the task ends (or fails) the worker packs its run folder,
  removes its scratch folder and returns the pack; the driver unpacks it where a local run writes
  (``RunLayout.for_task``), trusting nothing in it (no path out of the folder, no link, no FIFO or
  device, a size cap refused in one sentence), and rewrites the worker's paths in the host-written
  documents (``outcome.json``, ``delivery.json``, ``phases/*.json``) to the driver's.
- **A lost worker.** A worker that dies (or whose node goes) is replaced up to ``retries`` times,
  seeded with every call the driver committed for the task; after that the task's outcome is
  ``error`` naming the lost worker's node.
"""

from __future__ import annotations

import hashlib
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from veriscale.errors import UserError, one_line, setting
from veriscale.harness.protocol.layout import RunLayout
from veriscale.harness.protocol.task_protocol import ProtocolConfig

#: seconds a node may take to answer the preflight
PREFLIGHT_TIMEOUT_S = 120.0
AGENTS = ("builtin", "pi")


class _WorkerLost(Exception):
    """The task's worker stopped before it gave its run folder back (the task is asked again)."""


class RayTasks:
    """Tasks of ``harness run`` as Ray tasks (module docstring). ``setup``: a picklable callable each
    worker runs first; ``runtime_env``: Ray's, for the workers (and the preflight) of this run;
    ``on_call``: called on the driver after each batch of committed calls."""

    name = "ray"

    def __init__(self, address: str | None = None, *, retries: int = 2, setup: Callable[[], None] | None = None,
                 runtime_env: dict[str, Any] | None = None, max_bytes: int | None = None,
                 on_call: Callable[[int], None] | None = None, preflight_timeout_s: float = PREFLIGHT_TIMEOUT_S) -> None:
        from veriscale.many.run_folder_transfer import DEFAULT_MAX_BYTES

        self.address, self.retries, self.setup, self.runtime_env = address, retries, setup, runtime_env
        self.max_bytes = max_bytes or DEFAULT_MAX_BYTES
        self.on_call, self.preflight_timeout_s = on_call, preflight_timeout_s
        self.attempts: dict[str, int] = {}  # task folder -> workers it took (1: no retry)
        self._remote: Any = None

    # -- joining and preflight ---------------------------------------------------------------
    def start(self, options: Any) -> None:
        if options.executor not in AGENTS:
            raise UserError(f"unknown agent '{options.executor}': use one of {', '.join(AGENTS)} ({setting('agent')})")
        from veriscale.many.ray_cluster import join
        from veriscale.models import uri as model_uri

        model_uri.check_scheme(options.model_uri)  # a bad URI is one sentence here, not an error in every task
        join(self.address, drop=setting("executor", "ray"), runtime_env=self.runtime_env)
        import ray

        self.preflight(options.executor, options.no_jail, options.model_uri)
        from veriscale.many.ray_harness_worker import run_task_here

        remote = ray.remote(num_returns="streaming", max_retries=0)(run_task_here)
        self._remote = remote.options(runtime_env=self.runtime_env) if self.runtime_env else remote

    def preflight(self, agent: str, no_jail: bool, model_uri: str) -> None:
        """One check pinned to each alive node; any node lacking something is one ``UserError``."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from veriscale.many.ray_harness_worker import node_check

        check = ray.remote(num_cpus=0, max_retries=0)(node_check)
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        ips = [n.get("NodeManagerAddress", n["NodeID"]) for n in nodes]
        refs = []  # one check per node: nodes may share an IP (several raylets on one host)
        for node, ip in zip(nodes, ips):
            pinned = check.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
                                   **({"runtime_env": self.runtime_env} if self.runtime_env else {}))
            name = ip if ips.count(ip) == 1 else f"{ip} (Ray node {node['NodeID'][:12]})"
            refs.append((name, pinned.remote(agent, no_jail, model_uri, self.setup)))
        problems = []
        for ip, ref in refs:
            try:
                found = ray.get(ref, timeout=self.preflight_timeout_s)
            except ray.exceptions.GetTimeoutError:
                problems.append(f"node {ip} did not answer the check within {self.preflight_timeout_s:g} s (is it busy or "
                                "gone? check 'ray status')")
                continue
            except ray.exceptions.RayError as exc:
                problems.append(f"node {ip} cannot run veriscale ({one_line(str(exc)).splitlines()[0][:200]}): install "
                                "the same veriscale there or give the workers a runtime_env that has it")
                continue
            if found["missing"]:
                problems.append(f"node {ip} lacks {'; and '.join(found['missing'])}")
        if problems:
            raise UserError("a harness task cannot run on every node of the Ray cluster, so nothing was run: "
                            + "; ".join(problems) + f"; fix those nodes, or drop {setting('executor', 'ray')}")

    # -- one task ----------------------------------------------------------------------------
    def run_task(self, task_dir: Path, layout: RunLayout, config: ProtocolConfig, *, options: Any, run_id: str,
                 store: Any, store_run_id: int, log: Callable[[str], None]) -> dict[str, Any]:
        from veriscale import settings as setting_source
        from veriscale.harness.safe_fs import resolved
        from veriscale.harness.workspace.contract import TaskWorkspace
        from veriscale.many.ray_harness_worker import HarnessPayload
        from veriscale.many.run_folder_transfer import pack_folder

        task = TaskWorkspace.open(resolved(task_dir, "task folder"))  # the same sentence as a local run
        task_tar, left_out = pack_folder(task.path, max_bytes=self.max_bytes, what="the task folder")
        for line in left_out:
            log(f"{task.name}: not sent to the worker: {line}")
        skills = [pack_folder(Path(folder), max_bytes=self.max_bytes, what="the skills folder")[0]
                  for folder in config.skills_dirs]
        mine = _earlier_calls(store, str(task_dir), run_id)
        payload = HarnessPayload(
            task_name=task.name, task_tar=task_tar, run_id=run_id, config=config, agent=options.executor,
            runs_root=options.runs_root is not None, skills=skills, chosen=setting_source.source.choices(),
            concurrency=options.concurrency, max_bytes=self.max_bytes, setup=self.setup,
            scratch_key=hashlib.sha256(str(layout.root).encode()).hexdigest()[:20])
        lost = ""
        for attempt in range(1, self.retries + 2):
            self.attempts[str(task_dir)] = attempt
            payload.run_tar = (pack_folder(layout.root, max_bytes=self.max_bytes, what="the run folder")[0]
                               if layout.root.is_dir() else None)
            payload.seeds = _seeds(store, mine)
            try:
                result = self._attempt(payload, store, store_run_id, log, mine)
            except _WorkerLost as gone:
                lost = str(gone)
                log(f"{task.name}: {lost}" + ("; asking another worker" if attempt <= self.retries else ""))
                continue
            return self._landed(result, task.path, layout, log)
        raise UserError(f"{lost} ({self.retries + 1} workers were lost at this task): the calls they finished are "
                        "in the store; rerun with the same run id to resume")

    def _attempt(self, payload: Any, store: Any, store_run_id: int, log: Callable[[str], None],
                 mine: set[str]) -> dict[str, Any]:
        import ray

        from veriscale.models.cancel import current_stop, stopped

        stream = self._remote.remote(payload)
        items: queue.Queue[tuple[str, Any]] = queue.Queue()

        def read() -> None:
            try:
                for ref in stream:
                    items.put(ray.get(ref))
                items.put(("ended", None))
            except ray.exceptions.RayError as exc:  # the worker died, its node went, it ran out of memory
                items.put(("lost", one_line(str(exc)).splitlines()[0][:300]))
            except BaseException as exc:  # noqa: BLE001 - anything else ends the attempt too
                items.put(("lost", f"{type(exc).__name__}: {exc}"))

        threading.Thread(target=read, name="veriscale-harness-stream", daemon=True).start()
        where = "a Ray worker"
        while True:
            try:
                kind, data = items.get(timeout=0.5)
            except queue.Empty:
                try:
                    stopped(current_stop())
                except BaseException:
                    try:  # the worker's protocol stops at its next wait; its run folder stays as it was here
                        ray.cancel(stream, force=False)
                    except Exception:  # noqa: BLE001 - already ended
                        pass
                    raise
                continue
            if kind == "node":
                where = f"the worker on node {data['ip']} (pid {data['pid']})"
            elif kind == "log":
                log(str(data))
            elif kind == "calls":
                store.submit(_commit, store, store_run_id, data).result()
                mine.update(row["key"] for row in data["calls"] if row["status"] == "ok")
                mine.update(link["key"] for link in data["links"])
                if self.on_call is not None and data["calls"]:
                    self.on_call(len(data["calls"]))
            elif kind == "done":
                return {**data, "where": where}
            elif kind == "crash":  # the worker is alive but could not set the task up: asking again would not help
                raise UserError(f"{where} could not run the task ({one_line(str(data))[:300]})")
            else:  # "lost", "ended" without a result
                raise _WorkerLost(f"{where} was lost ({data or 'its stream ended without a result'})")

    def _landed(self, result: dict[str, Any], task_dir: Path, layout: RunLayout, log: Callable[[str], None]) -> dict[str, Any]:
        """Unpack the worker's run folder at ``layout.root`` (its paths made the driver's); the outcome."""
        from veriscale.harness.host_caps import current as current_caps
        from veriscale.many.ray_worker import arrived
        from veriscale.many.run_folder_transfer import unpack_folder

        moves = ((result["run_dir"], str(layout.root)), (result["task_dir"], str(task_dir)))
        for line in result.get("left_out") or []:
            log(f"{task_dir.name}: not sent back by {result['where']}: {line}")
        if result.get("run_tar") is not None:
            caps = current_caps()
            report = unpack_folder(result["run_tar"], layout.root, max_bytes=self.max_bytes,
                                   max_entries=5 * caps.handback_max_files, max_depth=caps.handback_max_depth + 8,
                                   what=f"the run folder {result['where']} sent back",
                                   before_swap=lambda staging: _relocate_documents(staging, moves))
            for line in report.left_out:
                log(f"{task_dir.name}: left out of the run folder {result['where']} sent back: {line}")
        if result.get("raised") is not None:
            raise arrived(result["raised"])
        return _relocated(result["outcome"], moves)


def _earlier_calls(store: Any, task: str, run_id: str) -> set[str]:
    """The calls linked to this store's earlier ``harness task`` runs of ``task`` under ``run_id`` (a
    resumed run's seeds)."""
    rows, _ = store.execute("SELECT id FROM runs WHERE command = 'harness task' AND json_extract(args, '$.task') = ? "
                            "AND json_extract(args, '$.run_id') = ?", (task, run_id))
    keys: set[str] = set()
    for (run,) in rows:
        found, _ = store.execute("SELECT call_key FROM run_calls WHERE run_id = ?", (run,))
        keys.update(k for (k,) in found)
    return keys


def _seeds(store: Any, keys: set[str]) -> list[dict[str, Any]]:
    from veriscale.many.call_feed import rows_of_keys

    return rows_of_keys(store, sorted(keys), "AND status = 'ok'")


def _commit(store: Any, run_id: int, data: dict[str, Any]) -> None:
    """On the store's writer thread: a worker's new calls and the task run's links to them."""
    from veriscale.many.call_feed import put_rows

    put_rows(store, data["calls"])
    for link in data["links"]:
        store.link_call(run_id, link["key"], cache_hit=link["cache_hit"], label=link["label"])


def _relocated(value: Any, moves: tuple[tuple[str, str], ...]) -> Any:
    """``value`` with every string that starts with a worker path starting with the driver's instead."""
    if isinstance(value, str):
        for old, new in moves:
            if value == old or value.startswith(old + "/"):
                return new + value[len(old):]
        return value
    if isinstance(value, dict):
        return {k: _relocated(v, moves) for k, v in value.items()}
    if isinstance(value, list):
        return [_relocated(v, moves) for v in value]
    return value


def _relocate_documents(root: Path, moves: tuple[tuple[str, str], ...]) -> None:
    """The host-written documents of an unpacked run folder, with the driver's paths."""
    from veriscale.data.reader import parse_json
    from veriscale.harness.jsonfiles import json_text
    from veriscale.harness.protocol.session_records import MAX_RECORD_BYTES
    from veriscale.harness.safe_fs import UnsafePath, read_bytes_beneath, walk_regular_files
    from veriscale.harness.safe_write import write_beneath

    names = ["outcome.json", "delivery.json"]
    if (root / "phases").is_dir() and not (root / "phases").is_symlink():
        names += [rel.as_posix() for rel, _ in walk_regular_files(root, "phases") if rel.suffix == ".json"]
    for name in names:
        try:
            document = parse_json(read_bytes_beneath(root, name, max_bytes=MAX_RECORD_BYTES).decode("utf-8"), name)
        except (UnsafePath, ValueError, UserError):
            continue  # missing or not a document: left as it came
        write_beneath(root, name, json_text(_relocated(document, moves)).encode("utf-8"))
