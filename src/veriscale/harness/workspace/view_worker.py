"""Render text views in a child process with a deadline, so no file can stall or swell the host.

    with ViewWorker(limits) as worker:
        view = worker.render(Path("deck.pptx"))   # a ViewResult; ``error`` set on timeout or crash

The child renders one file at a time (``views.render_view`` under the same caps) and answers
one JSON line per file. A file that takes longer than ``limits.view_seconds`` gets its child
killed and a view whose error is one sentence naming the file and the cap; the next file gets
a fresh child. The child caps its own address space (``RLIMIT_AS``) at what its readers use once
loaded plus ``limits.view_memory_bytes``, so a parser that swells within the inflation caps fails
there, not on the host.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from veriscale.harness.workspace.text_views import DEFAULT_MAX_CHARS, DEFAULT_MAX_FILE_BYTES, ViewResult, refused_view, render_view
from veriscale.harness.workspace.capped_child import READY, STARTUP_SECONDS, start_child, stop_child
from veriscale.harness.workspace.zip_limits import RAISE_IT, ZipLimits, cap_text



class ViewWorker:
    """A child process that renders views; see the module docstring."""

    def __init__(self, limits: ZipLimits | None = None, *, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
                 max_chars: int = DEFAULT_MAX_CHARS) -> None:
        self.limits = limits or ZipLimits.from_env()
        self.max_file_bytes = max_file_bytes
        self.max_chars = max_chars
        self._child: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> "ViewWorker":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def render(self, path: Path) -> ViewResult:
        """The view of ``path``, rendered in the child within the time cap."""
        request = {"path": str(path), "limits": self.limits.as_dict(),
                   "max_file_bytes": self.max_file_bytes, "max_chars": self.max_chars}
        child = self._start()
        try:
            assert child.stdin is not None
            child.stdin.write(json.dumps(request).encode() + b"\n")
            child.stdin.flush()
            line = self._read_line(child, time.monotonic() + self.limits.view_seconds)
        except OSError:  # the child died (its memory cap): the pipe is gone
            line = b""
        if line is None:
            self.close()
            return refused_view(path, f"reading it took longer than {cap_text('view_seconds', self.limits)}; {RAISE_IT}")
        try:
            answer: dict[str, Any] = json.loads(line)
        except ValueError:
            self.close()
            return refused_view(path, f"its reader stopped, likely over {cap_text('view_memory_bytes', self.limits)}; "
                                      f"{RAISE_IT}")
        if answer["error"]:
            self.close()  # a reader that failed (out of memory, say) leaves nothing behind for the next file
            if answer["error"].startswith("MemoryError"):
                return refused_view(path, f"reading it ran out of {cap_text('view_memory_bytes', self.limits)}; {RAISE_IT}")
        return ViewResult(**answer)

    def close(self) -> None:
        """Stop the child (killed if it is still busy)."""
        child, self._child = self._child, None
        stop_child(child)

    def _start(self) -> subprocess.Popen[bytes]:
        if self._child is not None and self._child.poll() is None:
            return self._child
        self.close()
        # the deadline of a request starts once the child has imported its readers, not before
        self._child = start_child("veriscale.harness.workspace.view_worker", what="the text-view process",
                                  ready=lambda child: self._read_line(child, time.monotonic() + STARTUP_SECONDS) == READY)
        return self._child

    def _read_line(self, child: subprocess.Popen[bytes], deadline: float) -> bytes | None:
        """One answer line; ``None`` when the deadline passed first (the child is killed)."""
        assert child.stdout is not None
        fd = child.stdout.fileno()
        buffer = bytearray()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    child.kill()
                    return None
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    return bytes(buffer)  # the child died mid-answer
                buffer += chunk
        return bytes(buffer.split(b"\n", 1)[0])


def serve() -> None:
    """The child's loop: one JSON request per stdin line, one JSON answer per stdout line."""
    for reader in ("openpyxl", "docx", "pypdf"):  # imported before the first deadline starts
        try:
            __import__(reader)
        except ImportError:
            pass  # the view says which package is missing
    sys.stdout.buffer.write(READY + b"\n")
    sys.stdout.buffer.flush()
    limit_set = False
    for raw in sys.stdin.buffer:
        request = json.loads(raw)
        limits = ZipLimits(**request["limits"])
        if not limit_set:
            _cap_memory(limits.view_memory_bytes)
            limit_set = True
        view = render_view(Path(request["path"]), max_file_bytes=request["max_file_bytes"],
                           max_chars=request["max_chars"], limits=limits)
        answer = {"text": view.text, "truncated": view.truncated, "error": view.error, "refused": view.refused}
        sys.stdout.buffer.write(json.dumps(answer).encode() + b"\n")
        sys.stdout.buffer.flush()


def _cap_memory(allowance: int) -> None:
    """Cap the address space at what the loaded readers use plus ``allowance``."""
    try:
        import resource

        with open("/proc/self/statm") as statm:
            in_use = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (ImportError, OSError, ValueError):  # not on this platform: the inflation caps still hold
        return
    limit = in_use + allowance
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard == resource.RLIM_INFINITY or limit < hard:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
