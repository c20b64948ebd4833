"""Signals during a race: SIGTERM/SIGHUP clean up like Ctrl-C, and cleanup itself is not cut short.

    with signals_raise_interrupt():      # SIGTERM, SIGHUP -> KeyboardInterrupt, as SIGINT is
        race()
    with interrupts_deferred():          # a Ctrl-C here waits until the block is done,
        remove_worktrees()               # then is raised as KeyboardInterrupt

Both do nothing outside the main thread (only it can set signal handlers).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from veriscale.engine.run_scope import Terminated


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


_deferring: list[list[int]] = []  # the signals held by the outermost interrupts_deferred, while one is active


def _hook(sigs: tuple[int, ...], handler) -> dict[int, object]:
    """Set ``handler`` for each signal not ignored (a ``nohup`` SIGHUP stays ignored); the old ones."""
    saved = {}
    for sig in sigs:
        if signal.getsignal(sig) is not signal.SIG_IGN:
            saved[sig] = signal.signal(sig, handler)
    return saved


def _restore(saved: dict[int, object]) -> None:
    for sig, handler in saved.items():
        signal.signal(sig, handler)


@contextlib.contextmanager
def signals_raise_interrupt() -> Iterator[None]:
    """While racing, SIGTERM and SIGHUP clean up like Ctrl-C does (raise KeyboardInterrupt)."""
    if not _main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt  # Terminated is a KeyboardInterrupt

    saved = _hook((signal.SIGTERM, signal.SIGHUP), interrupt)
    try:
        yield
    finally:
        _restore(saved)


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP while cleaning up, so a second Ctrl-C cannot cut cleanup short;
    one that arrived meanwhile is raised (as KeyboardInterrupt) when the outermost block ends."""
    if not _main_thread() or _deferring:
        yield
        return
    got: list[int] = []
    _deferring.append(got)
    saved = _hook((signal.SIGINT, signal.SIGTERM, signal.SIGHUP), lambda signum, frame: got.append(signum))
    try:
        yield
    finally:
        _restore(saved)
        _deferring.pop()
    if got:
        raise KeyboardInterrupt
