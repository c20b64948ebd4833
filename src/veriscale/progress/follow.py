"""Read a JSONL file that a running agent is still appending to, one complete line at a time.

    for number, line in follow_lines(Path("run.jsonl"), idle_timeout=600, on_wait=print):
        record = json.loads(line)          # a line is yielded only once its newline is written

It waits for the file to appear (``on_wait`` hears why once), waits for partial lines to be
finished, and ends when no new byte arrived for ``idle_timeout`` seconds (None: wait forever).
A file that shrinks (truncated or replaced) ends it with a UserError; so does a FIFO or device
(only a regular file is read, see ``veriscale.data.reader``) and a line over the input size limit.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from veriscale.data.reader import MAX_INPUT_ENV, max_input_bytes, open_regular
from veriscale.errors import UserError

POLL_S = 0.2


class IdleTimeout(Exception):
    """No new data arrived for the idle timeout."""


def follow_lines(path: Path, *, idle_timeout: float | None = None, poll_s: float = POLL_S,
                 on_wait: Callable[[str], None] | None = None) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` for each complete line; raise IdleTimeout when idle too long."""
    last_data = time.monotonic()
    announced = False
    while not path.exists():
        if not announced and on_wait is not None:
            on_wait(f"waiting for '{path}' to appear (the agent has not written it yet)")
            announced = True
        _idle_check(last_data, idle_timeout)
        time.sleep(poll_s)
    if path.is_dir():
        raise UserError(f"'{path}' is a folder: follow the JSONL file the agent writes its steps to")
    cap = max_input_bytes()
    buffer, number, offset = b"", 0, 0
    with open_regular(path, "steps file", "have the agent append its steps to a regular file") as handle:
        while True:
            chunk = handle.read(1 << 16)
            if chunk:
                offset += len(chunk)
                last_data = time.monotonic()
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for raw in lines:
                    number += 1
                    yield number, raw.decode("utf-8", errors="replace")
                if len(buffer) > cap:
                    raise UserError(f"line {number + 1} of '{path}' is longer than the {cap / (1 << 20):.3g} MiB input limit: "
                                    f"write one step a line, or raise {MAX_INPUT_ENV}")
                continue
            try:
                size = os.stat(path).st_size
            except FileNotFoundError:
                raise UserError(f"'{path}' was removed while it was followed: keep the file until the run ends") from None
            if size < offset:
                raise UserError(f"'{path}' shrank while it was followed (truncated or replaced): "
                                "append to the file instead of rewriting it")
            _idle_check(last_data, idle_timeout)
            time.sleep(poll_s)


def _idle_check(last_data: float, idle_timeout: float | None) -> None:
    if idle_timeout is not None and time.monotonic() - last_data > idle_timeout:
        raise IdleTimeout()
