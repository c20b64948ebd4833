"""Upkeep of a store: prune old runs (and the model calls only they used), then vacuum the file.

A run is selected by its command (``kinds``), how it ended (``statuses``) and its age
(``older_than``: seconds, or a duration such as ``30d``, ``12h``, ``90m``; measured from when the
run ended, else its last heartbeat, else its start); every filter given must match. Pruning a run
removes its events, steps and call links, and then the model calls it linked to that no kept run
links to and no process has claimed (in flight, ``call_leases``); a call a kept run links to is
never removed, nor is a call no run ever linked to (made outside any run), unless ``orphans``. The
images the removed calls sent go with them, unless a kept call sent them too (``call_images``)::

    report = prune(store, older_than="30d", kinds=["select"], statuses=["ok"], dry_run=True)
    report.runs, report.calls, report.events, report.bytes_before     # what would go; nothing changed
    report = prune(store, older_than="30d")                           # removed, in one transaction
    vacuum(store).bytes_after                                         # the file rewritten without free pages

Runs form trees (a harness run's tasks are its child runs, ``parent_id``): the filters select
top-level runs only, and a selected run takes its whole tree with it, children judged by their
parent; so a kept child always keeps its parent. A run still ``running`` is never pruned, nor is
any run of its tree: a live one is skipped (counted in ``report.running``), and one whose process
died is first ended as ``interrupted`` (:func:`veriscale.engine.run_liveness.settle_dead_runs`;
a dry run only judges it so, writing nothing). The server's ``jobs`` rows are kept; a job whose
run was pruned shows no run. Run ids are never reused (``AUTOINCREMENT``).

The prune is one ``BEGIN IMMEDIATE`` transaction under the store's lock, after the writes already
handed to its writer thread (:meth:`veriscale.engine.store.Store.transaction`), so it waits for
another process's write as long as any write does (``--store-wait``) and lands whole or not at all.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from veriscale.engine.run_liveness import ProcessIdentity, is_dead, settle_dead_runs, stale_after_s
from veriscale.engine.store import Store
from veriscale.engine.store_faults import GuardedConnection
from veriscale.errors import UserError

__all__ = ["PruneReport", "VacuumReport", "parse_duration", "prune", "store_bytes", "vacuum"]

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*([smhdw]?)\s*$", re.IGNORECASE)
_RUN_COLUMNS = "id, parent_id, command, status, created_at, finished_at, heartbeat_at, host, boot_id, pid, pid_start"
#: the ids of the runs being pruned, as one JSON array bound to ``?1``
_PRUNED = "(SELECT value FROM json_each(?1))"


def parse_duration(value: float | str, name: str = "older_than") -> float:
    """Seconds in ``value``: a number of seconds, or a number with a unit s, m, h, d or w
    (``"30d"``, ``"12h"``, ``"1.5h"``); anything else, or a negative or endless one, is one sentence
    naming ``name`` (the CLI passes its flag)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        match = _DURATION.match(str(value))
        if match is None:
            raise UserError(f"{name} {str(value)!r} is not a duration: give a number with a unit s, m, h, d or w, "
                            f"e.g. {name} 30d or {name} 12h")
        seconds = float(match[1]) * _UNITS[(match[2] or "s").lower()]
    if not math.isfinite(seconds) or seconds < 0:
        raise UserError(f"{name} {value} is not a duration of zero or more seconds: give e.g. {name} 30d")
    return seconds


def store_bytes(path: Path) -> int:
    """The store's size on disk: its file and its write-ahead log (0 where missing)."""
    total = 0
    for part in (path, path.with_name(path.name + "-wal")):
        try:
            total += part.stat().st_size
        except OSError:
            pass
    return total


@dataclass(frozen=True)
class PruneReport:
    """What a prune removed (or, with ``dry_run``, would remove)."""

    dry_run: bool
    runs: int            # runs removed, their child runs included
    child_runs: int      # of which child runs (harness tasks)
    calls: int           # model calls removed
    events: int          # run events removed
    steps: int           # trajectory steps removed
    links: int           # run-to-call links removed
    running: int         # runs the filters matched but that are still running (never pruned), trees included
    bytes_before: int    # the store's size on disk before
    bytes_after: int     # and after (the same for a dry run; a file shrinks only when vacuumed)
    run_ids: tuple[int, ...] = ()  # the top-level runs removed, oldest first
    images: int = 0      # kept images removed: those no remaining call sent

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["run_ids"] = list(self.run_ids)
        return doc


@dataclass(frozen=True)
class VacuumReport:
    bytes_before: int
    bytes_after: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _names(values: str | Iterable[str] | None) -> list[str]:
    if values is None:
        return []
    return [values] if isinstance(values, str) else [v for v in values if v]


def _select(rows: Sequence[tuple[Any, ...]], *, kinds: list[str], statuses: list[str], older_than: float | None,
            now: float, dead: set[int]) -> tuple[list[int], list[int], int]:
    """From every run's row: ``(top-level ids to prune, every id to prune, runs kept as running)``.
    ``dead``: ``running`` runs judged dead (read as ``interrupted``); any other ``running`` run is live."""
    by_id = {row[0]: row for row in rows}
    children: dict[int, list[int]] = {}
    for row in rows:
        if row[1] is not None and row[1] in by_id:
            children.setdefault(row[1], []).append(row[0])

    def status(row: tuple[Any, ...]) -> str:
        return "interrupted" if row[3] == "running" and row[0] in dead else str(row[3])

    tops: list[int] = []
    pruned: list[int] = []
    running = 0
    if not kinds and not statuses and older_than is None:
        return tops, pruned, running  # no run filter (orphans alone): no run is selected
    for row in rows:
        if row[1] is not None and row[1] in by_id:
            continue  # a child run follows its parent
        if kinds and row[2] not in kinds:
            continue
        if statuses and status(row) not in statuses:
            continue
        if older_than is not None:
            ended = next((t for t in (row[5], row[6], row[4]) if t is not None), now)
            if now - float(ended) < older_than:
                continue
        tree, todo = [], [row[0]]
        while todo:
            rid = todo.pop()
            tree.append(rid)
            todo.extend(children.get(rid, ()))
        if any(status(by_id[rid]) == "running" for rid in tree):
            running += len(tree)
            continue
        tops.append(row[0])
        pruned.extend(tree)
    return sorted(tops), sorted(pruned), running


def _dead_running(rows: Sequence[tuple[Any, ...]], now: float) -> set[int]:
    """The ``running`` runs whose process is gone (as :func:`settle_dead_runs` judges), without writing."""
    stale_s = stale_after_s()
    return {row[0] for row in rows if row[3] == "running"
            and is_dead(ProcessIdentity(row[7], row[8], row[9], row[10]), row[6], row[4], now=now, stale_s=stale_s)}


def _calls_sql(orphans: bool) -> str:
    """The calls a prune removes (``?1``: the pruned runs' ids): linked by no kept run, claimed by no one,
    and linked by a pruned run (or, with ``orphans``, by any run or none)."""
    used = "" if orphans else f"key IN (SELECT call_key FROM run_calls WHERE run_id IN {_PRUNED}) AND "
    return (f"FROM calls WHERE {used}key NOT IN (SELECT call_key FROM run_calls WHERE run_id NOT IN {_PRUNED}) "
            "AND key NOT IN (SELECT key FROM call_leases)")


def _images_sql(orphans: bool) -> str:
    """The kept images a prune removes: those no call it keeps links to (``call_images``)."""
    return (f"FROM images WHERE sha256 NOT IN (SELECT sha256 FROM call_images WHERE call_key NOT IN "
            f"(SELECT key {_calls_sql(orphans)}))")


def _measure(count: Callable[[str, str], int], pruned: list[int], orphans: bool) -> dict[str, int]:
    """What pruning ``pruned`` removes besides the runs; ``count(sql, ids)`` counts ``SELECT COUNT(*) sql``."""
    ids = json.dumps(pruned)
    return {"calls": count(_calls_sql(orphans), ids), "images": count(_images_sql(orphans), ids),
            "events": count(f"FROM run_events WHERE run_id IN {_PRUNED}", ids),
            "steps": count(f"FROM run_steps WHERE run_id IN {_PRUNED}", ids),
            "links": count(f"FROM run_calls WHERE run_id IN {_PRUNED}", ids)}


def prune(store: Store, *, older_than: float | str | None = None, kinds: str | Iterable[str] | None = None,
          statuses: str | Iterable[str] | None = None, orphans: bool = False, dry_run: bool = False,
          now: float | None = None) -> PruneReport:
    """Remove the runs every given filter selects, their trees, events, steps and links, and the calls
    no kept run links to (module docstring); with ``dry_run``, only count them. ``now`` (default the
    clock) is the time ``older_than`` counts back from. At least one filter (or ``orphans``) is required."""
    kind_list, status_list = _names(kinds), _names(statuses)
    age = None if older_than is None else parse_duration(older_than)
    if age is None and not kind_list and not status_list and not orphans:
        raise UserError("prune needs at least one filter: give older_than (e.g. 30d), a kind or a status")
    if "running" in status_list:
        raise UserError("a running run is never pruned (one whose process died reads interrupted): "
                        "give another status, e.g. interrupted or failed")
    when = time.time() if now is None else float(now)
    before = store_bytes(store.path)

    def selected(rows: Sequence[tuple[Any, ...]], dead: set[int]) -> tuple[list[int], list[int], int]:
        return _select(rows, kinds=kind_list, statuses=status_list, older_than=age, now=when, dead=dead)

    if dry_run:  # through the store's read path: nothing is written, and a read-only store works
        def read_count(sql: str, ids: str) -> int:
            rows, _ = store.execute(f"SELECT COUNT(*) {sql}", (ids,))
            return int(rows[0][0])

        rows, _ = store.execute(f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY id")
        tops, pruned, running = selected(rows, _dead_running(rows, time.time()))
        return PruneReport(True, len(pruned), len(pruned) - len(tops), running=running, bytes_before=before,
                           bytes_after=before, run_ids=tuple(tops), **_measure(read_count, pruned, orphans))

    settle_dead_runs(store)  # a dead `running` run is ended as interrupted first, as `runs list` does

    def remove(conn: GuardedConnection) -> tuple[list[int], list[int], int, dict[str, int]]:
        def count(sql: str, ids: str) -> int:
            return int(conn.execute(f"SELECT COUNT(*) {sql}", (ids,)).fetchone()[0])

        rows = conn.execute(f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY id").fetchall()
        tops, pruned, running = selected(rows, set())  # settled: every run still `running` is live
        counts = _measure(count, pruned, orphans)
        ids = json.dumps(pruned)
        conn.execute(f"DELETE {_images_sql(orphans)}", (ids,))  # before the calls: it reads which go
        conn.execute(f"DELETE FROM call_images WHERE call_key IN (SELECT key {_calls_sql(orphans)})", (ids,))
        conn.execute(f"DELETE {_calls_sql(orphans)}", (ids,))
        for table, column in (("run_calls", "run_id"), ("run_events", "run_id"), ("run_steps", "run_id"),
                              ("runs", "id")):
            conn.execute(f"DELETE FROM {table} WHERE {column} IN {_PRUNED}", (ids,))
        return tops, pruned, running, counts

    tops, pruned, running, counts = store.transaction(remove)
    return PruneReport(False, len(pruned), len(pruned) - len(tops), running=running, bytes_before=before,
                       bytes_after=store_bytes(store.path), run_ids=tuple(tops), **counts)


def vacuum(store: Store) -> VacuumReport:
    """Rewrite the store file without its free pages (SQLite ``VACUUM``), then fold the write-ahead
    log back into it; its size on disk before and after. It waits for the writes already handed over,
    and for another process's write as long as any write does."""
    before = store_bytes(store.path)
    store.execute("VACUUM")
    store.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return VacuumReport(before, store_bytes(store.path))
