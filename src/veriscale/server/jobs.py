"""Jobs: submitted over REST, kept in the store's ``jobs`` table, run by worker threads.

    runner = JobRunner(store, model, roots=(Path("/data"),), workers=1,
                       injection={"injection_policy": "exclude"})   # serve: the resolved injection settings
    runner.start()                       # unfinished jobs of an earlier server run are queued again
    job = runner.submit("select", {"paths": ["/data/pool.jsonl"]})
    runner.get(job["id"])["status"]      # queued | running | done | failed | cancelled
    runner.cancel(job["id"])

A job's work goes through the gateway with the store as its cache, so a job that was running
when the server died resumes on restart without repeating a finished model call: a new run
answers the finished calls from the store, and the old run reads ``interrupted`` once its
heartbeat is stale (:mod:`veriscale.engine.run_liveness`). A job's run is a
:func:`~veriscale.engine.run_scope.recorded_run`: a cancel ends it ``cancelled``, a crash ``failed``.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from veriscale.settings.words import cli_text
from veriscale.engine.run_liveness import settle_dead_runs
from veriscale.engine.run_log import RunLog
from veriscale.engine.run_scope import RunCancelled, RunHandle, recorded_run
from veriscale.engine.store import Store
from veriscale.errors import UserError, VeriscaleError, one_line
from veriscale.harness.safe_fs import is_within
from veriscale.server import job_kinds
from veriscale.server.dashboard_data import NotFound
from veriscale.verify.injection import check_policy

STATUSES = ("queued", "running", "done", "failed", "cancelled")
UNFINISHED = ("queued", "running")
_COLUMNS = "id, kind, params, status, run_id, error, attempts, cancel_requested, created_at, started_at, finished_at"
CALL_EVENT_INTERVAL_S = 0.25  # at most this often a "calls" event per running job


def allowed_path(given: str, roots: tuple[Path, ...]) -> Path:
    """``given`` resolved (links followed: where it really is), if that lies under one of ``roots``."""
    try:
        resolved = Path(given).expanduser().resolve()
    except (RuntimeError, ValueError, OSError):  # "~nobody/x" (no such home), a NUL, a path too long
        raise UserError(f"'{one_line(given)[:200]}' is not a path this server can resolve: give an absolute path "
                        "under one of its folders") from None
    shown = one_line(given)[:200]  # a refusal names the client's own path only, never where a link leads
    if not any(is_within(resolved, root) for root in roots):
        raise UserError(f"'{shown}' is outside the folders this server may read: give a path under one of "
                        "the folders GET /api/info lists")
    if not resolved.exists():
        raise UserError(f"'{shown}' does not exist: check the path")
    if resolved.is_dir():
        _no_links_out(given, resolved, roots)
    return resolved


def _no_links_out(given: str, folder: Path, roots: tuple[Path, ...]) -> None:
    """Refuse a folder holding a link that leads outside ``roots`` (the importers would follow it)."""
    for here, dirs, files in os.walk(folder):  # does not descend into linked folders
        for name in dirs + files:
            entry = Path(here) / name
            if entry.is_symlink() and not any(is_within(entry.resolve(), root) for root in roots):
                raise UserError(f"'{one_line(given)[:200]}' holds a link ('{one_line(str(entry.relative_to(folder)))[:200]}') that leads outside the "
                                "folders this server may read: remove it or copy the files it points to")


class InvalidParams(UserError):
    """A job's params that passed the schema but not a check at submit (the route answers 422)."""


class JobCancelled(RunCancelled):
    """Raised inside a job's progress callback once cancel was asked for (its run ends ``cancelled``)."""


class JobTable:
    """The ``jobs`` table."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def add(self, kind: str, params: dict[str, Any]) -> int:
        _, rowid = self.store.execute("INSERT INTO jobs (kind, params, status, created_at) VALUES (?, ?, 'queued', ?)",
                                      (kind, json.dumps(params), time.time()))
        return int(rowid or 0)

    def get(self, job_id: int) -> dict[str, Any] | None:
        rows, _ = self.store.execute(f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", (job_id,))
        return _job(rows[0]) if rows else None

    def list(self, status: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        where, params = ("WHERE status = ?", (status,)) if status else ("", ())
        rows, _ = self.store.execute(f"SELECT {_COLUMNS} FROM jobs {where} ORDER BY id DESC LIMIT ?", (*params, limit))
        return [_job(r) for r in rows]

    def unfinished(self) -> list[dict[str, Any]]:
        rows, _ = self.store.execute(f"SELECT {_COLUMNS} FROM jobs WHERE status IN ('queued', 'running') ORDER BY id")
        return [_job(r) for r in rows]

    def with_runs(self, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each job with ``runs``: every run its attempts opened, oldest first (a job queued again after a
        restart has the interrupted run and the new one), each ``{"id", "status", "created_at", "finished_at"}``."""
        if not jobs:
            return jobs
        ids = [job["id"] for job in jobs]
        marks = ", ".join("?" * len(ids))
        rows, _ = self.store.execute(
            f"SELECT id, status, created_at, finished_at, job FROM (SELECT id, status, created_at, finished_at, "
            f"CASE WHEN json_valid(args) THEN json_extract(args, '$.job') END AS job FROM runs WHERE parent_id IS NULL) "
            f"WHERE job IN ({marks}) ORDER BY id", tuple(ids))
        found: dict[int, dict[int, dict[str, Any]]] = {i: {} for i in ids}
        for run_id, status, created, finished, job in rows:
            found[job][run_id] = {"id": run_id, "status": status, "created_at": created, "finished_at": finished}
        adopted = [j for j in jobs if j["run_id"] is not None and j["run_id"] not in found[j["id"]]]
        for job in adopted:  # a harness job's run records no job: it is the job's run_id
            run = self.store.run(job["run_id"])
            if run is not None:
                found[job["id"]][run.id] = {"id": run.id, "status": run.status, "created_at": run.created_at,
                                            "finished_at": run.finished_at}
        return [{**job, "runs": sorted(found[job["id"]].values(), key=lambda r: r["id"])} for job in jobs]

    def update(self, job_id: int, **fields: Any) -> None:
        names = ", ".join(f"{k} = ?" for k in fields)
        self.store.execute(f"UPDATE jobs SET {names} WHERE id = ?", (*fields.values(), job_id))


def _job(row: tuple[Any, ...]) -> dict[str, Any]:
    names = _COLUMNS.split(", ")
    job = dict(zip(names, row))
    job["params"] = json.loads(job["params"])
    job["cancel_requested"] = bool(job["cancel_requested"])
    return job


@dataclass(kw_only=True)
class RunnerContext:
    """What a job runner (``server/job_kinds.py``) may use wherever it runs (a REST job, an MCP tool): the
    store, the server's model, the folders it may read, its run and the run's log."""

    store: Store
    model: Any
    roots: tuple[Path, ...]
    concurrency: int = 4
    #: SelectionSettings keywords: injection_detect, injection_mitigation, injection_policy (empty: defaults)
    injection: Mapping[str, Any] = field(default_factory=dict)
    run: RunHandle | None = None
    runs: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)  # the run ends with the work
    log: RunLog = field(init=False)

    def __post_init__(self) -> None:
        self.log = RunLog(self.store)

    @property
    def run_id(self) -> int | None:
        return None if self.run is None else self.run.id

    def path(self, given: str) -> Path:
        """``given`` resolved, if it lies under an ``--allow-dir`` root; else one sentence."""
        return allowed_path(given, self.roots)

    def open_run(self, command: str, model: str | None, args: dict[str, Any]) -> int:
        """Open the work's run, current for the rest of it (its calls are linked to it); its id."""
        self.run = self.runs.enter_context(recorded_run(self.store, command, model, args))
        return self.run.id


@dataclass(kw_only=True)
class JobContext(RunnerContext):
    """A REST job's context: its id and its cancel flag besides the runner's."""

    job_id: int
    cancelled: threading.Event

    def start_run(self, command: str, model: str | None, args: dict[str, Any]) -> int:
        """Open the job's run (its args name the job); its id, kept on the job."""
        run_id = self.open_run(command, model, {**args, "job": self.job_id})
        JobTable(self.store).update(self.job_id, run_id=run_id)
        return run_id

    def adopt_run(self, run_id: int) -> None:
        """A job whose work records its own run (the harness) names it afterwards."""
        JobTable(self.store).update(self.job_id, run_id=run_id)

    def check(self) -> None:
        if self.cancelled.is_set():
            raise JobCancelled()

    def call_counter(self, planned: int) -> Callable[[Any], None]:
        """A progress callback: checks for cancel and emits throttled ``calls`` events."""
        done, last = 0, 0.0

        def count(_outcome: Any) -> None:
            nonlocal done, last
            done += 1
            now = time.monotonic()
            if self.run_id is not None and (now - last >= CALL_EVENT_INTERVAL_S or done >= planned):
                last = now
                self.log.emit(self.run_id, "calls", {"done": done, "planned": planned})
            self.check()

        return count


class JobRunner:
    """A queue of job ids and ``workers`` threads that run them one at a time each."""

    def __init__(self, store: Store, model: Any, *, roots: tuple[Path, ...] = (), workers: int = 1,
                 concurrency: int = 4, injection: Mapping[str, Any] | None = None) -> None:
        self.store = store
        self.table = JobTable(store)
        self.model = model
        self.roots = tuple(Path(r).resolve() for r in roots)
        self.workers = workers
        self.concurrency = concurrency
        self.injection = dict(injection or {})
        check_policy(self.injection.get("injection_policy", "none"))
        self._queue: queue.Queue[int | None] = queue.Queue()
        self._cancel: dict[int, threading.Event] = {}
        self._threads: list[threading.Thread] = []

    def start(self) -> int:
        """Queue again the jobs an earlier server left unfinished; start the workers. Returns how many resumed."""
        settle_dead_runs(self.store)  # an earlier server's runs, once their heartbeat is stale
        resumed = self.table.unfinished()
        for job in resumed:
            self.table.update(job["id"], status="queued")
            self._enqueue(job["id"])
        for n in range(self.workers):
            thread = threading.Thread(target=self._work, name=f"job-worker-{n}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return len(resumed)

    def stop(self) -> None:
        for _ in self._threads:
            self._queue.put(None)

    def submit(self, kind: str, params: dict[str, Any]) -> dict[str, Any]:
        if kind not in job_kinds.RUNNERS:
            raise UserError(f"unknown job kind '{kind}': use one of {', '.join(job_kinds.RUNNERS)}")
        for given in job_kinds.paths_in(kind, params):  # refused now, not when the job runs
            allowed_path(given, self.roots)
        criteria = params.get("criteria")
        if isinstance(criteria, str) and job_kinds.is_criteria_file(criteria):  # a file: read it now too
            from veriscale.verify.criteria import load_criteria

            try:
                load_criteria(str(allowed_path(criteria, self.roots)))
            except UserError as exc:
                raise InvalidParams(f"a {kind} job's 'params.criteria': {one_line(str(exc))}") from None
        job_id = self.table.add(kind, params)
        self._enqueue(job_id)
        return self.get(job_id)

    def get(self, job_id: int) -> dict[str, Any]:
        job = self.table.get(job_id)
        if job is None:
            raise NotFound(f"there is no job {job_id}: list jobs with GET /api/jobs")
        return job

    def listed(self, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``jobs`` as the API shows them: with every run of every attempt (:meth:`JobTable.with_runs`),
        whose status is read after the runs of dead processes are settled."""
        settle_dead_runs(self.store)
        return self.table.with_runs(jobs)

    def cancel(self, job_id: int) -> dict[str, Any]:
        job = self.get(job_id)
        if job["status"] not in UNFINISHED:
            return job
        if job["status"] == "running" and job["kind"] not in job_kinds.CANCELLABLE_WHILE_RUNNING:
            raise UserError(f"job {job_id} is a running {job['kind']} job, which cannot stop mid-session: "
                            "wait for it to finish")
        self.table.update(job_id, cancel_requested=1)
        self._cancel[job_id].set()
        if job["status"] == "queued":
            self.table.update(job_id, status="cancelled", finished_at=time.time())
        return self.get(job_id)

    def _enqueue(self, job_id: int) -> None:
        self._cancel[job_id] = threading.Event()
        self._queue.put(job_id)

    def _work(self) -> None:
        while (job_id := self._queue.get()) is not None:
            job = self.table.get(job_id)
            if job is None or job["status"] != "queued":
                continue
            self._run(job)

    def _run(self, job: dict[str, Any]) -> None:
        job_id = job["id"]
        self.table.update(job_id, status="running", started_at=time.time(), attempts=job["attempts"] + 1,
                          error=None, run_id=None)
        ctx = JobContext(job_id=job_id, store=self.store, model=self.model, roots=self.roots,
                         cancelled=self._cancel[job_id], concurrency=self.concurrency, injection=self.injection)
        status, error, result = "done", None, None
        with ctx.runs:  # whatever escapes below still ends the job's run
            try:
                result = job_kinds.run_job(job["kind"], job["params"], ctx)
            except JobCancelled:
                status, error = "cancelled", "cancelled on request"
            except VeriscaleError as exc:
                status, error = "failed", cli_text(exc.template)  # the server was started with flags
            except Exception as exc:  # noqa: BLE001 - a job's crash is its result, the server goes on
                status, error = "failed", f"{type(exc).__name__}: {exc}"
            if status == "done" and (why := _run_failed(result, ctx)) is not None:
                status, error = "failed", why  # the job is what its run is: a run that failed is a failed job
            if ctx.run is not None:
                ctx.log.emit(ctx.run.id, "status", {"job": job_id, "status": status, "error": error})
                run_status = {"done": "ok"}.get(status, status)
                ctx.run.finish(run_status, result if result is not None else {"error": error})
        self.table.update(job_id, status=status, error=error, finished_at=time.time())


def _run_failed(result: Any, ctx: JobContext) -> str | None:
    """Why a job that returned a result failed, or None: its result names errors or failed tasks, or the
    run it adopted (a harness run) ended ``failed``."""
    result = result if isinstance(result, dict) else {}
    errors = [str(e) for e in result.get("errors") or []]
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return one_line(f"the run failed: {errors[0]}{more}")[:500]
    listed = result.get("tasks")  # a harness run's tasks; select-many counts its tasks and lists "failures"
    tasks = [t for t in (listed if isinstance(listed, list) else result.get("failures") or []) if isinstance(t, dict)]
    adopted = None if ctx.run is not None else JobTable(ctx.store).get(ctx.job_id)["run_id"]
    run = ctx.store.run(adopted) if adopted is not None else None
    if result.get("failed") or (run is not None and run.status == "failed"):
        from veriscale.harness.protocol.protocol_runner import FAILED_OUTCOMES

        first = next((f"{t.get('task', 'a task')}: {t.get('error') or t.get('outcome')}" for t in tasks
                      if t.get("error") or t.get("outcome") in FAILED_OUTCOMES), None)
        of = listed if isinstance(listed, int) else len(tasks)
        count = f"{result['failed']} of {of} task(s) failed" if result.get("failed") and tasks else "the run failed"
        return one_line(f"{count}{f': {first}' if first else ''}")[:500]
    return None
