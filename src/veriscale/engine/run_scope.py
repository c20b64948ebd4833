"""The run a piece of work belongs to: opened, held in a context variable, always ended.

Work that is a run (a command, a server job, a proxied request) runs inside :func:`recorded_run`.
The run is the *current run* of that code and of everything it starts: the gateway links every
call it makes (cache hits too) to :func:`current_run_id`, also from the gateway's own loop thread
and its worker threads, which inherit the caller's context. The body records its result with
``finish``; however else it exits, the run still ends::

    with recorded_run(store, "score", model.uri, {"task": "t.md"}) as run:
        result = verifier.score(task, answer)          # every call is linked to run.id
        run.finish("failed" if result.failed else "ok", result.to_dict())

How a run ends when the body does not call ``finish``:

- it returns: ``ok``;
- it raises: ``failed``, the result ``{"error": <the one sentence>, **run.partial}``;
- Ctrl-C (KeyboardInterrupt), SIGTERM (:class:`Terminated`, raised by the handler
  :func:`install_sigterm_handler` sets), a cancelled task or a job cancel (:class:`RunCancelled`):
  ``cancelled``. A stop that was asked for is a cancel; ``interrupted`` is kept for a run whose
  process died without ending it (:mod:`veriscale.engine.run_liveness` finds those);
- a ``SystemExit`` or ``typer.Exit`` with code 0: ``ok``, another code: ``failed``; a prompt
  answered with Ctrl-C (``typer.Abort``): ``cancelled``.

While a run is open one daemon thread of the process beats its heartbeat. A run that outlives
its ``with`` (a proxy's conversation) is opened with :func:`open_run`, made current around each
piece of its work with ``run.current()`` and ended with ``run.finish(...)``; one still open when
the interpreter exits is ended as ``interrupted``.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import signal
import threading
from collections.abc import Iterator
from typing import Any

from veriscale.engine.run_liveness import MAX_BEAT_S, beat_every_s, stale_after_s
from veriscale.engine.store import Store
from veriscale.errors import VeriscaleError

_CURRENT: contextvars.ContextVar[RunHandle | None] = contextvars.ContextVar("veriscale_current_run", default=None)


class RunCancelled(Exception):
    """Raise inside a run to end it as ``cancelled`` (a server job whose cancel was asked for)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread: every Ctrl-C cleanup runs, and the run says SIGTERM."""


def install_sigterm_handler() -> None:
    """Make SIGTERM raise :class:`Terminated` in the main thread (a no-op elsewhere, or when ignored)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
        return

    def terminate(signum: int, frame: Any) -> None:
        raise Terminated()

    signal.signal(signal.SIGTERM, terminate)


def error_sentence(exc: BaseException) -> str:
    """What an ended run records as its error: veriscale's own errors keep their setting references."""
    if isinstance(exc, VeriscaleError):
        return exc.template
    return str(exc) or type(exc).__name__


def _ending(exc: BaseException) -> tuple[str, str | None]:
    """(status, error) for a body that raised ``exc``; error None: none to record."""
    if isinstance(exc, Terminated):
        return "cancelled", "stopped by SIGTERM; finished model calls are saved in the store and a rerun resumes"
    if isinstance(exc, KeyboardInterrupt):
        return "cancelled", "interrupted by Ctrl-C; finished model calls are saved in the store and a rerun resumes"
    if isinstance(exc, RunCancelled):
        return "cancelled", str(exc) or "cancelled on request"
    if isinstance(exc, (asyncio.CancelledError, GeneratorExit)):
        return "cancelled", "cancelled before it finished"
    import click
    import typer  # a prompt answered with Ctrl-C, an exit with a code (typer's own, or click's beneath it)

    if isinstance(exc, (typer.Abort, click.Abort)):
        return "cancelled", "cancelled at a prompt"
    if isinstance(exc, (SystemExit, typer.Exit, click.exceptions.Exit)):
        code = exc.code if isinstance(exc, SystemExit) else exc.exit_code
        return ("ok", None) if code in (0, None) else ("failed", f"the command exited with code {code}")
    return "failed", error_sentence(exc)


class _Heartbeat:
    """One daemon thread per process that beats every open run's heartbeat."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[int, RunHandle] = {}
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self.every_s = MAX_BEAT_S  # lowered by the first run that wants a faster beat

    def add(self, handle: RunHandle, every_s: float) -> None:
        with self._lock:
            self._open[id(handle)] = handle
            if every_s < self.every_s:
                self.every_s = every_s
                self._wake.set()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._beat, name="veriscale-heartbeat", daemon=True)
                self._thread.start()

    def remove(self, handle: RunHandle) -> None:
        with self._lock:
            self._open.pop(id(handle), None)

    def still_open(self) -> list[RunHandle]:
        with self._lock:
            return list(self._open.values())

    def _beat(self) -> None:
        while True:
            self._wake.wait(self.every_s)
            self._wake.clear()
            by_store: dict[int, tuple[Store, list[int]]] = {}
            for handle in self.still_open():
                by_store.setdefault(id(handle.store), (handle.store, []))[1].append(handle.id)
            for store, ids in by_store.values():
                try:
                    store.beat(ids)
                except Exception:  # noqa: BLE001 - a locked or closed store: the next beat tries again
                    pass


_HEARTBEAT = _Heartbeat()


class RunHandle:
    """One open run of the store: its ``id``; ``partial`` is merged into a failure's record."""

    def __init__(self, store: Store, run_id: int) -> None:
        self.store = store
        self.id = run_id
        self.partial: dict[str, Any] = {}
        self.status: str | None = None  # set once it ended
        self._lock = threading.Lock()

    def finish(self, status: str, result: Any) -> bool:
        """End the run with ``status`` and ``result``; only the first end counts (returns whether this one did)."""
        with self._lock:
            if self.status is not None:
                return False
            try:
                self.store.finish_run(self.id, status, result)
            finally:  # written or not, it beats no more: a run that could not be ended reads interrupted later
                _HEARTBEAT.remove(self)
            self.status = status
        return True

    def end_by(self, exc: BaseException | None) -> None:
        """End the run as its body's exit says (``exc`` None: it returned) unless it already ended."""
        if self.status is not None:
            return
        if exc is None:
            self.finish("ok", self.partial or None)
            return
        status, error = _ending(exc)
        self.finish(status, {**self.partial, "error": error} if error else (self.partial or None))

    @contextlib.contextmanager
    def current(self) -> Iterator[RunHandle]:
        """Make this the current run for the block (calls the block makes are linked to it)."""
        token = _CURRENT.set(self)
        try:
            yield self
        finally:
            try:
                _CURRENT.reset(token)
            except ValueError:  # ended in another context (a generator closed elsewhere)
                pass


def open_run(store: Store, command: str, model: str | None, args: dict[str, Any], *,
             parent: int | None = None) -> RunHandle:
    """Start a run and beat its heartbeat until it is finished (see the module docstring)."""
    every_s = beat_every_s(stale_after_s())  # a bad VERISCALE_RUN_STALE_S stops here, before the run
    handle = RunHandle(store, store.start_run(command, model, args, parent_id=parent))
    _HEARTBEAT.add(handle, every_s)
    return handle


@contextlib.contextmanager
def recorded_run(store: Store, command: str, model: str | None, args: dict[str, Any], *,
                 parent: int | None = None) -> Iterator[RunHandle]:
    """A run for the block, current inside it, ended however the block exits (module docstring)."""
    handle = open_run(store, command, model, args, parent=parent)
    try:
        with handle.current():
            yield handle
    except BaseException as exc:
        try:
            handle.end_by(exc)
        except Exception:  # noqa: BLE001 - a store that cannot be written must not hide the error itself
            pass
        raise
    handle.end_by(None)


def current_run() -> RunHandle | None:
    """The run the calling code belongs to, or None."""
    return _CURRENT.get()


def current_run_id() -> int | None:
    run = _CURRENT.get()
    return None if run is None else run.id


@atexit.register
def _end_open_runs() -> None:
    for handle in _HEARTBEAT.still_open():
        try:
            handle.finish("interrupted", {**handle.partial, "error": "the process exited while this run was open"})
        except Exception:  # noqa: BLE001 - a closed store: readers settle it by its heartbeat
            pass
