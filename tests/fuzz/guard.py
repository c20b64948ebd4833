"""Bounds and verdicts for one generated input: a wall-clock guard, a memory cap, the one-sentence rule.

    with bounded("score a.md b.md"):          # raises Hang after HANG_S seconds of wall time
        result = runner.invoke(app, argv)
    assert_one_sentence(message, "score a.md b.md")
    outcome("cli", "rejected")                 # counts the input for the suite's report

A hang is an input that runs past ``HANG_S`` (default 60 s, ``VERISCALE_FUZZ_HANG_S``): about a
hundred times what one input takes on a loaded 2-core machine, so the guard never depends on
machine speed; it is not a timing assertion. The memory cap keeps an input that reads without end
(``/dev/zero``) from taking the machine down: it ends as a ``MemoryError`` (a failure) instead.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import traceback
from collections import Counter, defaultdict
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

HANG_S = float(os.environ.get("VERISCALE_FUZZ_HANG_S", "60"))
MEMORY_HEADROOM = 3 << 30  # bytes of address space an input may add to what the process already maps

#: suite -> outcome ("accepted", "rejected", "traceback", "hang") -> count
COUNTS: dict[str, Counter] = defaultdict(Counter)
#: suite -> distinct causes of failures ("TypeError at veriscale/x.py:12")
CAUSES: dict[str, set[str]] = defaultdict(set)


class Hang(BaseException):
    """An input ran past the wall-clock guard (a BaseException, so no ``except Exception`` hides it)."""


def _mapped_bytes() -> int:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


@contextmanager
def bounded(what: str, seconds: float = HANG_S) -> Iterator[None]:
    """Run the body under the wall-clock guard and the memory cap (main thread only)."""

    def on_alarm(_signum, _frame):
        raise Hang(f"{what[:300]!r} ran past the {seconds:g} s hang guard")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    mapped = _mapped_bytes()
    if mapped:
        cap = mapped + MEMORY_HEADROOM
        resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def outcome(suite: str, kind: str) -> None:
    """Count one input of ``suite`` as ``kind`` (accepted, rejected, traceback or hang)."""
    COUNTS[suite][kind] += 1


def cause_of(exc: BaseException) -> str:
    """``TypeError at veriscale/data/x.py:12``: the innermost frame in veriscale's own code."""
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if "/veriscale/" in f.filename.replace("\\", "/")]
    where = own[-1] if own else (frames[-1] if frames else None)
    if where is None:
        return type(exc).__name__
    tail = where.filename.replace("\\", "/").split("/src/")[-1]
    return f"{type(exc).__name__} at {tail}:{where.lineno}"


def failed(suite: str, exc: BaseException, what: str) -> AssertionError:
    """Count a traceback or hang of ``suite`` and the error that fails the example."""
    kind = "hang" if isinstance(exc, Hang) else "traceback"
    outcome(suite, kind)
    CAUSES[suite].add(cause_of(exc))
    detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])
    return AssertionError(f"{kind} on {what[:500]!r}: {exc!r}\n{detail}")


def one_sentence_problem(message: str) -> str | None:
    """Why ``message`` is not one sentence (empty, several lines), or None when it is."""
    text = message.strip()
    if not text:
        return "the rejection is empty"
    if "\n" in text or "\r" in text:
        return "the rejection spans several lines"
    return None


def assert_one_sentence(suite: str, message: str, what: str) -> None:
    """Fail (and count as a traceback of the suite) unless ``message`` is one non-empty line."""
    problem = one_sentence_problem(message)
    if problem is not None:
        outcome(suite, "traceback")
        CAUSES[suite].add(f"not one sentence: {problem}")
        raise AssertionError(f"{problem} for {what[:500]!r}: {message[:2000]!r}")


REFUSED = object()  # what run_one returns for an input refused in one sentence


def run_one(suite: str, what: str, call, refused: tuple[type[BaseException], ...]):
    """``call()`` under the bounds: its result, or ``REFUSED`` when it raised one of ``refused``
    with a one-sentence message; any other exception or a hang fails the example."""
    try:
        with bounded(what):
            result = call()
    except KeyboardInterrupt:
        raise
    except refused as exc:
        assert_one_sentence(suite, str(exc), what)
        outcome(suite, "rejected")
        return REFUSED
    except BaseException as exc:  # noqa: BLE001 - every other exception is what the fuzzers look for
        raise failed(suite, exc, what) from exc
    return result


def report() -> dict[str, dict[str, object]]:
    """Per suite: inputs tried, outcomes, and the distinct causes of failures."""
    return {suite: {"inputs": sum(counts.values()), **dict(counts), "causes": sorted(CAUSES[suite])}
            for suite, counts in sorted(COUNTS.items())}


def write_report(path: str | os.PathLike) -> None:
    Path(path).write_text(json.dumps(report(), indent=2) + "\n", encoding="utf-8")
