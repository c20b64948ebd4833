"""The ``runs`` table: one row a command, job or harness task, with who runs it and how it ended.

    run_id = store.start_run("select", "embedded", {"files": [...]})   # status 'running'
    store.beat([run_id])                                             # its heartbeat
    store.finish_run(run_id, "ok", result)                           # or failed, cancelled, interrupted
    store.run(run_id)                                                # a RunRecord (None: no such run)

Open runs with :func:`veriscale.engine.run_scope.recorded_run`, which beats and ends them.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from veriscale.engine.ids import valid_id
from veriscale.engine.run_liveness import ProcessIdentity
from veriscale.engine.store_faults import GuardedConnection

_RUN_COLUMNS = ("id, command, model, args, status, result, created_at, finished_at, parent_id, "
                "host, boot_id, pid, pid_start, heartbeat_at")


#: A run's score, the number its verdict rests on (None: it has none): score, the reward; compare,
#: P(A beats B); track, the mean over its trajectories of the last checkpoint's progress value; any
#: other run (select, a proxied request), the confidence of its pick. Read from the result in SQL,
#: so the runs list sorts and filters 10,000 runs without loading them.
RUN_SCORE_SQL = """(SELECT CASE WHEN typeof(v) IN ('integer', 'real') THEN v END FROM (SELECT CASE
    WHEN r.result IS NULL OR NOT json_valid(r.result) THEN NULL
    WHEN r.command = 'score' THEN json_extract(r.result, '$.reward')
    WHEN r.command = 'compare' THEN json_extract(r.result, '$.p_a_wins')
    WHEN r.command IN ('track', 'track --follow') THEN CASE WHEN json_type(r.result, '$.curves') = 'array' THEN
        (SELECT AVG(json_extract(e.value, '$.points[#-1].value')) FROM json_each(r.result, '$.curves') e
         WHERE e.type = 'object') END
    ELSE json_extract(r.result, '$.confidence') END AS v))"""
#: A run's cost in tokens: prompt tokens sent plus completion tokens of the calls it and its child
#: runs (harness tasks) made; cache hits cost nothing (as :func:`veriscale.engine.run_cost.totals`).
RUN_TOKENS_SQL = """(SELECT COALESCE(SUM(COALESCE(c.prompt_tokens, 0) + COALESCE(c.completion_tokens, 0)), 0)
    FROM run_calls rc JOIN calls c ON c.key = rc.call_key
    WHERE rc.cache_hit = 0 AND rc.run_id IN (SELECT r.id UNION ALL SELECT k.id FROM runs k WHERE k.parent_id = r.id))"""
#: The runs list's sort keys and the column each sorts by.
RUN_SORTS = {"id": "id", "score": "score", "cost": "tokens"}


def _stored_json(text: Any, column: str, damaged: list[str]) -> Any:
    """``text`` decoded; None (and ``column`` added to ``damaged``) when it is not JSON."""
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError):
        damaged.append(column)
        return None


@dataclass
class RunRecord:
    id: int
    command: str
    model: str | None
    args: dict[str, Any]
    status: str
    result: Any
    created_at: float
    finished_at: float | None
    parent_id: int | None = None
    host: str | None = None  # who runs it (veriscale.engine.run_liveness), and its last heartbeat
    boot_id: str | None = None
    pid: int | None = None
    pid_start: int | None = None
    heartbeat_at: float | None = None
    damaged: tuple[str, ...] = ()  # columns whose stored JSON cannot be read ("args", "result")


class RunRecords:
    """The run methods of :class:`veriscale.engine.store.Store` (its connection and lock)."""

    _conn: GuardedConnection
    _lock: threading.Lock

    def start_run(self, command: str, model: str | None, args: dict[str, Any], *,
                  parent_id: int | None = None, owner: ProcessIdentity | None = None) -> int:
        """A new ``running`` run owned by ``owner`` (default: this process). Open runs with
        :func:`veriscale.engine.run_scope.recorded_run`, which beats its heartbeat and ends it."""
        owner = owner or ProcessIdentity.current()
        now = time.time()
        with self._lock:
            cur = self._conn.execute(
                "INSERT INTO runs (command, model, args, status, created_at, parent_id, host, boot_id, pid, pid_start, "
                "heartbeat_at) VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?)",
                (command, model, json.dumps(args, default=str), now, parent_id, owner.host, owner.boot_id,
                 owner.pid, owner.start, now),
            )
            run_id = cur.lastrowid
            assert run_id is not None, "an INSERT sets the new row's id"
            return run_id

    def beat(self, run_ids: list[int]) -> None:
        """Refresh the heartbeat of those of ``run_ids`` still running."""
        if not run_ids:
            return
        marks = ", ".join("?" * len(run_ids))
        with self._lock:
            self._conn.execute(f"UPDATE runs SET heartbeat_at = ? WHERE status = 'running' AND id IN ({marks})",
                               (time.time(), *run_ids))

    def running_runs(self, run_ids: Iterable[int] | None = None) -> list[dict[str, Any]]:
        """Owner and heartbeat of every ``running`` run (of ``run_ids``, if given)."""
        sql = "SELECT id, host, boot_id, pid, pid_start, heartbeat_at, created_at FROM runs WHERE status = 'running'"
        params: list[Any] = []
        if run_ids is not None:
            params = [int(r) for r in run_ids]
            if not params:
                return []
            sql += f" AND id IN ({', '.join('?' * len(params))})"
        with self._lock:
            rows = self._conn.execute(sql, params).fetchall()
        names = ("id", "host", "boot_id", "pid", "pid_start", "heartbeat_at", "created_at")
        return [dict(zip(names, row)) for row in rows]

    def interrupt_run(self, run_id: int, *, heartbeat_at: float | None, error: str) -> bool:
        """End a dead run as ``interrupted``, if it is still running with that heartbeat; True if it was."""
        with self._lock:
            cur = self._conn.execute(
                "UPDATE runs SET status = 'interrupted', result = ?, finished_at = ? "
                "WHERE id = ? AND status = 'running' AND heartbeat_at IS ?",
                (json.dumps({"error": error}), time.time(), run_id, heartbeat_at))
            return cur.rowcount > 0

    def child_runs(self, run_id: int) -> list[RunRecord]:
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {_RUN_COLUMNS} FROM runs WHERE parent_id = ? ORDER BY id", (run_id,)).fetchall()
        return [self._run(row) for row in rows]

    def finish_run(self, run_id: int, status: str, result: Any) -> None:
        with self._lock:
            self._conn.execute(
                "UPDATE runs SET status = ?, result = ?, finished_at = ? WHERE id = ?",
                (status, json.dumps(result, default=str), time.time(), run_id),
            )

    def runs(self, limit: int | None = None) -> list[RunRecord]:
        sql = f"SELECT {_RUN_COLUMNS} FROM runs WHERE parent_id IS NULL ORDER BY id DESC"
        params: tuple[Any, ...] = ()
        if limit:
            sql += " LIMIT ?"
            params = (min(limit, 2**63 - 1),)  # more than SQLite counts is the same as all
        with self._lock:
            rows = self._conn.execute(sql, params).fetchall()
        return [self._run(row) for row in rows]

    def run(self, run_id: int) -> RunRecord | None:
        if not valid_id(run_id):  # no row has it (and SQLite cannot bind an int past 2**63 - 1)
            return None
        with self._lock:
            row = self._conn.execute(
                f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = ?",
                (run_id,),
            ).fetchone()
        return self._run(row) if row else None

    @staticmethod
    def _run(row: tuple[Any, ...]) -> RunRecord:
        """The row as a record; a column whose JSON is corrupt reads as empty and is named in ``damaged``."""
        damaged: list[str] = []
        args = _stored_json(row[3], "args", damaged)
        if not isinstance(args, dict):
            args = {}
            if "args" not in damaged:
                damaged.append("args")
        result = _stored_json(row[5], "result", damaged) if row[5] else None
        created_at, finished_at, parent_id, host, boot_id, pid, pid_start, heartbeat_at = row[6:]
        return RunRecord(row[0], row[1], row[2], args, row[4], result, created_at, finished_at, parent_id=parent_id,
                         host=host, boot_id=boot_id, pid=pid, pid_start=pid_start, heartbeat_at=heartbeat_at,
                         damaged=tuple(damaged))

    def query_runs(self, *, command: str | None = None, status: str | None = None, text: str | None = None,
                   offset: int = 0, limit: int = 50) -> tuple[int, list[RunRecord]]:
        """Top-level runs, newest first, filtered (``text`` matches command, model, args or result):
        ``(how many match, the page [offset, offset + limit))``."""
        total, rows = self.query_runs_ranked(command=command, status=status, text=text, offset=offset, limit=limit)
        return total, [run for run, _score, _tokens in rows]

    def query_runs_ranked(self, *, command: str | None = None, status: str | None = None, text: str | None = None,
                          sort: str = "id", order: str = "desc", score: tuple[float | None, float | None] = (None, None),
                          cost: tuple[int | None, int | None] = (None, None), offset: int = 0,
                          limit: int = 50) -> tuple[int, list[tuple[RunRecord, float | None, int]]]:
        """:meth:`query_runs` with each run's score and token cost (:data:`RUN_SCORE_SQL`,
        :data:`RUN_TOKENS_SQL`), sorted by ``sort`` (id, score or cost; runs without a score last) in
        ``order`` (desc or asc) and kept to the ``[low, high]`` ``score`` and ``cost`` ranges (None: open)::

            total, rows = store.query_runs_ranked(sort="score", score=(0.5, None), cost=(None, 20_000))
            run, score, tokens = rows[0]
        """
        if sort not in RUN_SORTS or order not in ("asc", "desc"):
            raise ValueError(f"sort {sort!r} / order {order!r}: use one of {', '.join(RUN_SORTS)} / asc or desc")
        where, params = ["parent_id IS NULL"], []
        if command:
            where.append("command = ?")
            params.append(command)
        if status:
            where.append("status = ?")
            params.append(status)
        if text:
            like = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            where.append("(command LIKE ? ESCAPE '\\' OR model LIKE ? ESCAPE '\\' OR args LIKE ? ESCAPE '\\' "
                         "OR result LIKE ? ESCAPE '\\' OR CAST(id AS TEXT) = ?)")
            params += [like, like, like, like, text]
        outer, bounds = [], []
        for name, (low, high) in (("score", score), ("tokens", cost)):
            if low is not None:
                outer.append(f"{name} >= ?")
                bounds.append(low)
            if high is not None:
                outer.append(f"{name} <= ?")
                bounds.append(high)
        clause, kept = " AND ".join(where), " AND ".join(outer) or "1"
        key = RUN_SORTS[sort]
        direction = order.upper()
        ordering = f"id {direction}" if key == "id" else f"{key} IS NULL, {key} {direction}, id DESC"
        ranked = (f"SELECT * FROM (SELECT {_RUN_COLUMNS}, {RUN_SCORE_SQL} AS score, {RUN_TOKENS_SQL} AS tokens "
                  f"FROM runs r WHERE {clause}) WHERE {kept}")
        with self._lock:
            if outer:
                total = self._conn.execute(f"SELECT COUNT(*) FROM ({ranked})", [*params, *bounds]).fetchone()[0]
            else:  # no metric to filter on: count without computing one
                total = self._conn.execute(f"SELECT COUNT(*) FROM runs r WHERE {clause}", params).fetchone()[0]
            rows = self._conn.execute(f"{ranked} ORDER BY {ordering} LIMIT ? OFFSET ?",
                                      [*params, *bounds, limit, offset]).fetchall()
        width = len(_RUN_COLUMNS.split(", "))
        return total, [(self._run(row[:width]), row[width], int(row[width + 1] or 0)) for row in rows]
