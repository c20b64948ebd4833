"""The SQLite store: every model call and every run, committed as it completes.

Readable with any SQLite tool (tables ``calls``, ``runs``, ``run_calls``, ``meta``; ``run_events``
and ``run_steps`` belong to :mod:`veriscale.engine.run_log`, ``jobs`` to the server; the schema
changes only through :mod:`veriscale.engine.migrations`). A call is keyed by a hash of the
model fingerprint, prompt-template version, prompt and parameters; a rerun finds every call
that already succeeded, so a killed run resumes without repeating finished work. ``run_calls``
links each run to every call it used, cache hits included::

    store = Store.open()                      # per-user data dir, or Store.open("x.sqlite3")
    key = call_key(fingerprint, "v1", request_dict)
    if (hit := store.get_call(key)) is None:
        store.put_call(key, ..., status="ok", response=resp_dict)
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import platformdirs

from veriscale.engine.ids import valid_id
from veriscale.engine.migrations import migrate
from veriscale.engine.run_liveness import ProcessIdentity
from veriscale.errors import UserError, setting

_RUN_COLUMNS = ("id, command, model, args, status, result, created_at, finished_at, parent_id, "
                "host, boot_id, pid, pid_start, heartbeat_at")


def default_store_path() -> Path:
    """``$VERISCALE_STORE`` if set, else ``<user data dir>/veriscale/store.sqlite3``."""
    env = os.environ.get("VERISCALE_STORE")
    if env:
        return Path(env)
    return Path(platformdirs.user_data_dir("veriscale")) / "store.sqlite3"


def call_key(fingerprint: str, prompt_version: str, request: dict[str, Any]) -> str:
    """Stable hash of everything that determines a model call's answer."""
    blob = json.dumps([fingerprint, prompt_version, request], sort_keys=True, ensure_ascii=False)
    try:
        data = blob.encode("utf-8")
    except UnicodeEncodeError as exc:  # a backstop: inputs are checked where they are read (data.reader)
        raise UserError(f"a prompt holds a lone UTF-16 surrogate (U+{ord(blob[exc.start]):04X}), which no UTF-8 text "
                        "can hold: remove it from the task or candidate") from None
    return hashlib.sha256(data).hexdigest()


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


class Store:
    """Thread-safe access to one SQLite file (WAL mode, one commit per write)."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self.path = path

    @classmethod
    def open(cls, path: str | Path | None = None) -> "Store":
        p = Path(path) if path is not None else default_store_path()
        if p.exists() and p.is_dir():
            raise UserError(f"store path '{p}' is a folder: set {setting('store')} to a file path such as {p / 'store.sqlite3'}")
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(p), check_same_thread=False, timeout=30.0, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            migrate(conn, f"store file '{p}'")
        except sqlite3.DatabaseError as exc:
            raise UserError(f"store file '{p}' is not a readable veriscale store ({exc}): set {setting('store')} to another path") from None
        except OSError as exc:
            raise UserError(f"cannot create the store at '{p}' ({exc.strerror}): set {setting('store')} to a writable path") from None
        return cls(conn, p)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # -- calls -------------------------------------------------------------------------
    def get_call(self, key: str) -> dict[str, Any] | None:
        """The stored response of a successful call, or None."""
        with self._lock:
            row = self._conn.execute(
                "SELECT response FROM calls WHERE key = ? AND status = 'ok'", (key,)
            ).fetchone()
        return json.loads(row[0]) if row else None

    def put_call(self, key: str, *, model: str, fingerprint: str, prompt_version: str,
                 request: dict[str, Any], status: str, response: dict[str, Any] | None = None,
                 error: str | None = None, latency_s: float | None = None, kind: str = "score",
                 prompt_tokens: int | None = None, cached_tokens: int | None = None,
                 completion_tokens: int | None = None) -> None:
        """Commit one call's outcome. A success is never overwritten by a later failure."""
        with self._lock:
            self._conn.execute(
                """INSERT INTO calls (key, model, fingerprint, prompt_version, request, status,
                                      response, error, latency_s, created_at, kind, prompt_tokens,
                                      cached_tokens, completion_tokens)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT(key) DO UPDATE SET status=excluded.status, response=excluded.response,
                       error=excluded.error, latency_s=excluded.latency_s, created_at=excluded.created_at,
                       prompt_tokens=excluded.prompt_tokens, cached_tokens=excluded.cached_tokens,
                       completion_tokens=excluded.completion_tokens
                   WHERE calls.status != 'ok' OR excluded.status = 'ok'""",
                (key, model, fingerprint, prompt_version, json.dumps(request, ensure_ascii=False),
                 status, json.dumps(response) if response is not None else None, error, latency_s,
                 time.time(), kind, prompt_tokens, cached_tokens, completion_tokens),
            )

    def link_call(self, run_id: int, key: str, *, cache_hit: bool, label: str | None = None) -> None:
        """Record that run ``run_id`` used call ``key`` (a cache hit or not)."""
        with self._lock:
            self._conn.execute("INSERT INTO run_calls (run_id, call_key, cache_hit, label, at) VALUES (?, ?, ?, ?, ?)",
                               (run_id, key, int(cache_hit), label, time.time()))

    def run_calls(self, run_id: int) -> list[dict[str, Any]]:
        """Every call run ``run_id`` used, in order, with its kind, status, tokens and latency."""
        with self._lock:
            rows = self._conn.execute(
                """SELECT rc.call_key, rc.cache_hit, rc.label, c.kind, c.status, c.prompt_tokens,
                          c.cached_tokens, c.completion_tokens, c.latency_s, c.error
                   FROM run_calls rc LEFT JOIN calls c ON c.key = rc.call_key
                   WHERE rc.run_id = ? ORDER BY rc.id""", (run_id,)).fetchall()
        names = ("key", "cache_hit", "label", "kind", "status", "prompt_tokens", "cached_tokens",
                 "completion_tokens", "latency_s", "error")
        return [dict(zip(names, (r[0], bool(r[1]), *r[2:]))) for r in rows]

    def run_cost(self, run_id: int) -> dict[str, Any]:
        """Totals over a run's calls and those of its child runs (harness tasks)."""
        ids = [run_id] + [r.id for r in self.child_runs(run_id)]
        total = {"calls": 0, "cache_hits": 0, "failed": 0, "prompt_tokens": 0, "completion_tokens": 0}
        for rid in ids:
            for call in self.run_calls(rid):
                total["cache_hits" if call["cache_hit"] else "calls"] += 1
                total["failed"] += call["status"] == "failed"
                if not call["cache_hit"]:
                    total["prompt_tokens"] += call["prompt_tokens"] or 0
                    total["completion_tokens"] += call["completion_tokens"] or 0
        return total

    def count_calls(self, status: str | None = None) -> int:
        with self._lock:
            if status:
                return self._conn.execute("SELECT COUNT(*) FROM calls WHERE status = ?", (status,)).fetchone()[0]
            return self._conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    # -- runs --------------------------------------------------------------------------
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
            return int(cur.lastrowid)

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
            params = (limit,)
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
        return RunRecord(row[0], row[1], row[2], args, row[4], result, *row[6:], damaged=tuple(damaged))

    def iter_calls(self) -> Iterator[dict[str, Any]]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT key, model, status, error, latency_s, created_at FROM calls ORDER BY created_at"
            ).fetchall()
        for r in rows:
            yield {"key": r[0], "model": r[1], "status": r[2], "error": r[3], "latency_s": r[4], "created_at": r[5]}

    def query_runs(self, *, command: str | None = None, status: str | None = None, text: str | None = None,
                   offset: int = 0, limit: int = 50) -> tuple[int, list[RunRecord]]:
        """Top-level runs, newest first, filtered (``text`` matches command, model, args or result):
        ``(how many match, the page [offset, offset + limit))``."""
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
        clause = " AND ".join(where)
        with self._lock:
            total = self._conn.execute(f"SELECT COUNT(*) FROM runs WHERE {clause}", params).fetchone()[0]
            rows = self._conn.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE {clause} ORDER BY id DESC LIMIT ? OFFSET ?",
                                      [*params, limit, offset]).fetchall()
        return total, [self._run(row) for row in rows]

    def call(self, key: str) -> dict[str, Any] | None:
        """One call's whole record (request, response or error, tokens, latency), or None."""
        with self._lock:
            row = self._conn.execute(
                """SELECT key, model, kind, status, request, response, error, latency_s, created_at, prompt_tokens,
                          cached_tokens, completion_tokens FROM calls WHERE key = ?""", (key,)).fetchone()
        if row is None:
            return None
        names = ("key", "model", "kind", "status", "request", "response", "error", "latency_s", "created_at",
                 "prompt_tokens", "cached_tokens", "completion_tokens")
        record = dict(zip(names, row))
        record["request"] = json.loads(record["request"])
        record["response"] = json.loads(record["response"]) if record["response"] else None
        return record

    def execute(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> tuple[list[tuple[Any, ...]], int | None]:
        """Run one statement under the store's lock: ``(rows, lastrowid)``. For the modules that own
        the newer tables (``run_log``, the server's jobs); everything else has a method here."""
        with self._lock:
            cur = self._conn.execute(sql, params)
            return cur.fetchall(), cur.lastrowid

    def execute_many(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        """One statement over many rows, in one transaction."""
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                self._conn.executemany(sql, rows)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    # -- meta --------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        with self._lock:
            row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                (key, value),
            )
