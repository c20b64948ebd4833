"""Read a session's stdout or stderr as it streams, keeping only its head and tail.

A session can print without end; the host never holds more than ``cap_bytes`` of it::

    capture = BoundedCapture(proc.stdout, cap_bytes=4 << 20)   # starts a reader thread
    ...
    capture.join(); capture.text(), capture.total_bytes, capture.cut_bytes
"""

from __future__ import annotations

import threading
from typing import BinaryIO

CHUNK = 65536


class BoundedCapture:
    """Head (first half of the cap) and tail (last half) of a stream; the middle is counted."""

    def __init__(self, stream: BinaryIO, cap_bytes: int) -> None:
        self.cap_bytes = cap_bytes
        self.total_bytes = 0
        self._head = bytearray()
        self._tail = bytearray()
        self._stream = stream
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        half = max(1, self.cap_bytes // 2)
        try:
            while chunk := self._stream.read1(CHUNK) if hasattr(self._stream, "read1") else self._stream.read(CHUNK):
                self.total_bytes += len(chunk)
                room = half - len(self._head)
                if room > 0:
                    self._head += chunk[:room]
                    chunk = chunk[room:]
                if chunk:
                    self._tail += chunk
                    if len(self._tail) > half:
                        del self._tail[: len(self._tail) - half]
        except (OSError, ValueError):
            pass

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the stream's end; True when it ended."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def cut_bytes(self) -> int:
        return self.total_bytes - len(self._head) - len(self._tail)

    def text(self) -> str:
        """What was kept, decoded; a marker line says how many bytes were cut from the middle."""
        head = bytes(self._head).decode("utf-8", "replace")
        if not self.cut_bytes:
            return head + bytes(self._tail).decode("utf-8", "replace")
        tail = bytes(self._tail).decode("utf-8", "replace")
        return f"{head}\n[... {self.cut_bytes} bytes cut: output over the {self.cap_bytes}-byte capture cap ...]\n{tail}"
