"""Run the verification protocol over one task or many: concurrency, resume, per-phase limits.

Each task's run lives outside the task folder, in ``<task>.runs/<run-id>/`` beside it (or in
``<runs_root>/<task name>/<run-id>/``); see :mod:`veriscale.harness.protocol.task_protocol` for its files.
Running again with the same ``run_id`` resumes: a phase whose record is still valid is not
rerun. A task that fails is recorded and the others go on::

    options = RunOptions(model_uri="http://127.0.0.1:8000/v1#qwen", contract="artifact", concurrency=4)
    summary = run_tasks([Path("tasks/t1"), Path("tasks/t2")], options)
    summary["run_id"], [t["outcome"] for t in summary["tasks"]]

Per-phase timeouts: a session's wall-clock limit is ``phase_timeout_s``; the built-in agent
stops between steps when it is spent and every command it runs is killed with its whole process
group at that deadline; an external executor (pi) is killed with its process group.

Ctrl-C and SIGTERM (or an error escaping a task) stop the whole run: the main thread sets one
stop flag (:mod:`veriscale.models.cancel`) that every task, phase and model-call thread shares.
A model call in flight is cancelled through the gateway (recorded ``cancelled``), a jailed
command is killed with its process group and cgroup (its output folder is not handed back, so
the host copy stays as it was), the phase is recorded ``cancelled``, each task's store run and
the run itself end ``cancelled``. The main thread waits at most :data:`STOP_GRACE_S` for that.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from veriscale.engine.run_scope import RunCancelled, Terminated, recorded_run
from veriscale.engine.store import Store
from veriscale.errors import UserError, setting, worded
from veriscale.harness.sessions.agent import AgentLimits
from veriscale.harness.sessions.executors import Executor, make_executor
from veriscale.harness.jail.sandbox import JAIL_OFF_MESSAGE, JailLimits, check_jail_available
from veriscale.harness.protocol.session_records import CONTRACTS
from veriscale.harness.protocol.layout import RunLayout
from veriscale.harness.protocol.task_protocol import ProtocolConfig, run_protocol
from veriscale.harness.safe_fs import resolved
from veriscale.models.base import ModelBackend
from veriscale.models.cancel import StopFlag, Stopped, in_this_context, stopping_with

#: how long a stopped run waits for its tasks to end (each stops at its next wait; this bounds a stuck one)
STOP_GRACE_S = 30.0


def default_skills_dirs() -> list[Path]:
    """No user skill folders: the built-in library is always loaded and mounted by the protocol."""
    return []


def new_run_id() -> str:
    """A run id from the current local time, e.g. ``20250130-142501``."""
    return time.strftime("%Y%m%d-%H%M%S")


@dataclass
class RunOptions:
    """Everything ``veriscale harness run`` accepts."""

    model_uri: str
    contract: str = "artifact"
    concurrency: int = 2
    phase_timeout_s: float = 900.0
    no_jail: bool = False
    max_steps: int = 30
    max_tokens: int = 200_000
    max_tokens_per_call: int = 2048
    run_timeout_s: float = 120.0
    run_id: str | None = None
    runs_root: Path | None = None
    skills_dirs: Sequence[Path] | None = None
    executor: str = "builtin"
    store_path: Path | None = None  # None: the default store ($VERISCALE_STORE or the user data dir)
    jail_limits: JailLimits = field(default_factory=JailLimits)

    def check(self) -> None:
        if self.contract not in CONTRACTS:
            raise UserError(f"unknown contract '{self.contract}': use one of {', '.join(CONTRACTS)}")
        if self.concurrency < 1:
            raise UserError(f"session concurrency {self.concurrency} ({setting('concurrency')}) is below 1: give how many sessions may run at once")
        if not self.phase_timeout_s > 0:
            raise UserError(f"phase timeout {self.phase_timeout_s} ({setting('phase_timeout_s')}) is not positive: give seconds per phase")
        if self.run_id is not None and (not self.run_id or "/" in self.run_id or self.run_id.startswith(".")):
            raise UserError(f"run id '{self.run_id}' is not a plain folder name: use letters, digits, '-' or '_'")
        for folder in self.skills_dirs or ():
            if not Path(folder).is_dir():
                raise UserError(f"skills folder '{folder}' does not exist: fix the path or drop it from {setting('skills_dirs')}")

    def protocol_config(self) -> ProtocolConfig:
        limits = AgentLimits(max_steps=self.max_steps, max_tokens=self.max_tokens,
                             wall_clock_s=self.phase_timeout_s, max_tokens_per_call=self.max_tokens_per_call)
        skills = default_skills_dirs() if self.skills_dirs is None else [resolved(p, "skills folder") for p in self.skills_dirs]
        return ProtocolConfig(model_uri=self.model_uri, contract=self.contract, limits=limits,
                              run_timeout_s=min(self.run_timeout_s, self.phase_timeout_s),
                              no_jail=self.no_jail, skills_dirs=skills, jail_limits=self.jail_limits)


def jail_aware_log(sink: Callable[[str], None], no_jail: bool) -> Callable[[str], None]:
    """A logger that, with the jail off, puts :data:`JAIL_OFF_MESSAGE` on every line."""
    lock = threading.Lock()

    def log(line: str) -> None:
        text = worded(f"[{JAIL_OFF_MESSAGE.template}] {line}") if no_jail else line
        with lock:
            sink(text)

    return log


class RemoteTasks(Protocol):
    """Runs each task somewhere else (``--executor ray``: :class:`veriscale.many.ray_harness.RayTasks`)."""

    name: str

    def start(self, options: RunOptions) -> None:
        """Join the cluster and check every node can run a task; ``UserError`` before any work."""

    def run_task(self, task_dir: Path, layout: RunLayout, config: ProtocolConfig, *, options: RunOptions,
                 run_id: str, store: Store, store_run_id: int, log: Callable[[str], None]) -> dict[str, Any]:
        """One task's outcome document; its run folder written at ``layout.root``, its calls committed to
        ``store`` and linked to ``store_run_id``."""


def run_tasks(task_dirs: Sequence[Path], options: RunOptions, *, executor: Executor | None = None,
              backend: ModelBackend | None = None, log: Callable[[str], None] | None = None,
              remote: RemoteTasks | None = None) -> dict[str, Any]:
    """Run the protocol on every task; returns ``{"run_id", "tasks": [outcome, ...], "failed": n}``.

    ``executor`` overrides the one ``options.executor`` names; ``backend`` is handed to the
    built-in executor (tests use a scripted double). ``remote``: each task runs there instead of in
    this process (its ``start`` checks the cluster before any work; the agent loads there).
    """
    options.check()
    if not task_dirs:
        raise UserError("no task folders given: pass one or more materialised task folders")
    if remote is not None:
        remote.start(options)  # every node checked: one sentence, before any work
    elif not options.no_jail:
        check_jail_available()
    run_id = options.run_id or new_run_id()
    config = options.protocol_config()
    if remote is None and executor is None and options.executor == "builtin" and backend is None:
        from veriscale.models.uri import load_backend

        backend = load_backend(options.model_uri)  # a bad URI stops the run before any work
    store = Store.open(options.store_path)
    if remote is None:
        executor = executor or make_executor(options.executor, backend, store)
    log = jail_aware_log(log or (lambda _line: None), options.no_jail)
    if not options.no_jail and remote is None:
        from veriscale.harness.jail.limits import describe_limits, expected_mechanism

        log(describe_limits(options.jail_limits, expected_mechanism()))
    slots = threading.BoundedSemaphore(options.concurrency)
    stop, why = StopFlag(), ["stopped: the run ended early"]
    # The run and each task are runs in the store: `veriscale runs list/show` shows them, their
    # phases and every model call they made (the sessions' calls are linked to the task's run).
    with recorded_run(store, "harness run", options.model_uri, {
            "run_id": run_id, "tasks": [str(t) for t in task_dirs], "contract": options.contract,
            "executor": getattr(executor, "name", options.executor), "jail": "off" if options.no_jail else "on",
            **({"runs_on": remote.name} if remote is not None else {})}) as parent, \
            stopping_with(stop):

        def one(task_dir: Path) -> dict[str, Any]:
            task_dir = Path(task_dir)
            with recorded_run(store, "harness task", options.model_uri, {"task": str(task_dir), "run_id": run_id},
                              parent=parent.id) as task_run:
                try:
                    layout = RunLayout.for_task(task_dir, run_id, options.runs_root)
                    if remote is None:
                        outcome = run_protocol(task_dir, layout, config, executor, log=log, slots=slots,
                                               store_run_id=task_run.id)
                    else:
                        outcome = remote.run_task(task_dir, layout, config, options=options, run_id=run_id,
                                                  store=store, store_run_id=task_run.id, log=log)
                except Stopped:
                    log(f"{task_dir.name}: task cancelled ({why[0]})")
                    raise RunCancelled(why[0]) from None
                except Exception as exc:  # noqa: BLE001 - a failing task must not stop the others
                    message = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
                    log(f"{task_dir.name}: task failed ({message})")
                    outcome = {"task": task_dir.name, "task_dir": str(task_dir), "outcome": "error", "error": message}
                task_run.finish("ok" if outcome["outcome"] not in FAILED_OUTCOMES else "failed", _task_record(outcome))
            return outcome

        started = time.monotonic()
        outcomes = _run_all(one, task_dirs, options.concurrency, stop, why)
        failed = sum(1 for o in outcomes if o["outcome"] in FAILED_OUTCOMES)
        summary = {"run_id": run_id, "contract": options.contract, "model": options.model_uri,
                   "jail": "off" if options.no_jail else "on", "tasks": outcomes, "failed": failed,
                   "wall_s": round(time.monotonic() - started, 3), "store_run": parent.id}
        parent.finish("ok" if not failed else "failed", {**summary, "tasks": [_task_record(o) for o in outcomes]})
    return summary


FAILED_OUTCOMES = ("error", "no base chosen", "delivery failed")


def _run_all(one: Callable[[Path], dict[str, Any]], task_dirs: Sequence[Path], concurrency: int, stop: StopFlag,
             why: list[str]) -> list[dict[str, Any]]:
    """``one`` over the tasks in a pool; Ctrl-C, SIGTERM or an error sets ``stop`` and waits for the
    tasks to stop (at most :data:`STOP_GRACE_S`) before it goes on up (run_scope ends the run)."""
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="task")
    futures: list[Future] = []
    try:
        for task_dir in task_dirs:
            futures.append(pool.submit(in_this_context(one), task_dir))
        outcomes = [future.result() for future in futures]
    except BaseException as exc:
        why[0] = ("stopped by SIGTERM" if isinstance(exc, Terminated) else "interrupted by Ctrl-C"
                  if isinstance(exc, KeyboardInterrupt) else "stopped: another task raised an error")
        why[0] += "; a rerun with the same run id resumes"
        stop.set()  # every session's model call, jailed command and wait stops (see the module docstring)
        concurrent.futures.wait(futures, timeout=STOP_GRACE_S)
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return outcomes


def _task_record(outcome: dict[str, Any]) -> dict[str, Any]:
    """What the store keeps of a task's outcome: outcome, base, phases with their status and cost."""
    phases = {name: {k: state.get(k) for k in ("status", "reason", "calls", "steps", "prompt_tokens",
                                                  "completion_tokens", "wall_s", "resumed") if k in state}
              for name, state in (outcome.get("phases") or {}).items()}
    keep = ("task", "outcome", "base", "revisions", "error", "run_dir", "cost")
    return {**{k: outcome[k] for k in keep if k in outcome}, "phases": phases}
