"""The store's one writer thread: jobs run in the order they were handed over, each with its future.

    writer = StoreWriter()
    future = writer.submit(store.put_call, (key,), {...})   # runs on the writer thread
    writer.flush()                                          # every job handed over is done
    writer.stop()
    result = await landed(future)                           # from async code: the write lands even if
                                                            # the caller is cancelled meanwhile
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")

_Job = tuple[concurrent.futures.Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class StoreWriter:
    """One daemon thread that runs a store's jobs in the order they were submitted. It holds no
    reference to its store, so an unclosed store is still freed (and its thread stopped)."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self.pending = 0
        self.idle = threading.Condition()
        self.thread = threading.Thread(target=self._run, name="veriscale-store-writer", daemon=True)
        self.thread.start()

    def submit(self, fn: Callable[..., _T], args: tuple[Any, ...], kwargs: dict[str, Any]
               ) -> concurrent.futures.Future[_T]:
        future: concurrent.futures.Future[_T] = concurrent.futures.Future()
        with self.idle:
            self.pending += 1
        self.jobs.put((future, fn, args, kwargs))
        return future

    def _run(self) -> None:
        while (job := self.jobs.get()) is not None:
            future, fn, args, kwargs = job
            try:
                if future.set_running_or_notify_cancel():
                    try:
                        future.set_result(fn(*args, **kwargs))
                    except BaseException as exc:  # noqa: BLE001 - handed to the submitter
                        future.set_exception(exc)
            finally:
                del job, fn, args, kwargs
                with self.idle:
                    self.pending -= 1
                    self.idle.notify_all()

    def flush(self, timeout: float | None = None) -> None:
        if threading.current_thread() is self.thread:
            return
        with self.idle:
            self.idle.wait_for(lambda: self.pending == 0, timeout=timeout)

    def stop(self) -> None:
        self.jobs.put(None)


async def landed(future: concurrent.futures.Future[_T]) -> _T:
    """The result of a store job, awaited from async code; the job lands even when the awaiting task
    is cancelled (``asyncio.shield``), and a failure nobody awaits any more (a full disk while the
    caller was being cancelled) is still retrieved, so asyncio never logs "exception was never
    retrieved" beside the one sentence the caller already printed."""
    inner = asyncio.wrap_future(future)
    inner.add_done_callback(lambda f: f.cancelled() or f.exception())
    return await asyncio.shield(inner)
