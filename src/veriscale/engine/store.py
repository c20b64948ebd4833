"""The SQLite store: every model call and every run, committed as it completes.

Readable with any SQLite tool (tables ``calls``, ``runs``, ``meta``). A call is keyed by a hash
of the model fingerprint, prompt-template version, prompt and parameters; a rerun finds every
call that already succeeded, so a killed run resumes without repeating finished work::

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
from typing import Any, Iterator

import platformdirs

from veriscale.errors import UserError

SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    prompt_version TEXT NOT NULL,
    request TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    response TEXT,
    error TEXT,
    latency_s REAL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    command TEXT NOT NULL,
    model TEXT,
    args TEXT NOT NULL,
    status TEXT NOT NULL,
    result TEXT,
    created_at REAL NOT NULL,
    finished_at REAL
);
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""


def default_store_path() -> Path:
    """``$VERISCALE_STORE`` if set, else ``<user data dir>/veriscale/store.sqlite3``."""
    env = os.environ.get("VERISCALE_STORE")
    if env:
        return Path(env)
    return Path(platformdirs.user_data_dir("veriscale")) / "store.sqlite3"


def call_key(fingerprint: str, prompt_version: str, request: dict[str, Any]) -> str:
    """Stable hash of everything that determines a model call's answer."""
    blob = json.dumps([fingerprint, prompt_version, request], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


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
            raise UserError(f"store path '{p}' is a folder: pass --store with a file path such as {p / 'store.sqlite3'}")
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(p), check_same_thread=False, timeout=30.0, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise UserError(f"store file '{p}' is not a readable veriscale store ({exc}): pass --store with another path") from None
        except OSError as exc:
            raise UserError(f"cannot create the store at '{p}' ({exc.strerror}): pass --store with a writable path") from None
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
                 error: str | None = None, latency_s: float | None = None) -> None:
        """Commit one call's outcome. A success is never overwritten by a later failure."""
        with self._lock:
            self._conn.execute(
                """INSERT INTO calls (key, model, fingerprint, prompt_version, request, status,
                                      response, error, latency_s, created_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT(key) DO UPDATE SET status=excluded.status, response=excluded.response,
                       error=excluded.error, latency_s=excluded.latency_s, created_at=excluded.created_at
                   WHERE calls.status != 'ok' OR excluded.status = 'ok'""",
                (key, model, fingerprint, prompt_version, json.dumps(request, ensure_ascii=False),
                 status, json.dumps(response) if response is not None else None, error, latency_s,
                 time.time()),
            )

    def count_calls(self, status: str | None = None) -> int:
        with self._lock:
            if status:
                return self._conn.execute("SELECT COUNT(*) FROM calls WHERE status = ?", (status,)).fetchone()[0]
            return self._conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    # -- runs --------------------------------------------------------------------------
    def start_run(self, command: str, model: str | None, args: dict[str, Any]) -> int:
        with self._lock:
            cur = self._conn.execute(
                "INSERT INTO runs (command, model, args, status, created_at) VALUES (?, ?, ?, 'running', ?)",
                (command, model, json.dumps(args, default=str), time.time()),
            )
            return int(cur.lastrowid)

    def finish_run(self, run_id: int, status: str, result: Any) -> None:
        with self._lock:
            self._conn.execute(
                "UPDATE runs SET status = ?, result = ?, finished_at = ? WHERE id = ?",
                (status, json.dumps(result, default=str), time.time(), run_id),
            )

    def runs(self, limit: int | None = None) -> list[RunRecord]:
        sql = "SELECT id, command, model, args, status, result, created_at, finished_at FROM runs ORDER BY id DESC"
        params: tuple[Any, ...] = ()
        if limit:
            sql += " LIMIT ?"
            params = (limit,)
        with self._lock:
            rows = self._conn.execute(sql, params).fetchall()
        return [self._run(row) for row in rows]

    def run(self, run_id: int) -> RunRecord | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT id, command, model, args, status, result, created_at, finished_at FROM runs WHERE id = ?",
                (run_id,),
            ).fetchone()
        return self._run(row) if row else None

    @staticmethod
    def _run(row: tuple[Any, ...]) -> RunRecord:
        return RunRecord(row[0], row[1], row[2], json.loads(row[3]), row[4],
                         json.loads(row[5]) if row[5] else None, row[6], row[7])

    def iter_calls(self) -> Iterator[dict[str, Any]]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT key, model, status, error, latency_s, created_at FROM calls ORDER BY created_at"
            ).fetchall()
        for r in rows:
            yield {"key": r[0], "model": r[1], "status": r[2], "error": r[3], "latency_s": r[4], "created_at": r[5]}

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
