"""Store faults as one sentence each: a damaged, locked, read-only or full store names its file and the fix.

Every statement the store runs goes through a :class:`GuardedConnection`, which turns SQLite's and
the OS's errors about the file itself into a :class:`StoreFault` (a ``UserError`` with a ``kind``:
``corrupt``, ``damaged``, ``locked``, ``read_only``, ``full``, ``cannot_open``); any other error
(a bug) is raised as it was::

    conn = open_connection(Path("store.sqlite3"))   # writable, else read-only (conn.read_only)
    conn.execute("SELECT ...").fetchall()            # StoreFault("store file '...' is locked ...")
    fault(exc, path)                                 # the StoreFault for an error, or None

A store SQLite cannot write (a read-only mount, an immutable file) opens read-only, so the read
commands still work; a write then says the store is read-only. ``store_wait_s`` (``--store-wait``,
``$VERISCALE_STORE_WAIT``, default 30 s) is how long a statement waits for another process's lock.
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from veriscale import settings
from veriscale.errors import StoreFault, setting

_T = TypeVar("_T")

WAIT_ENV = "VERISCALE_STORE_WAIT"
DEFAULT_WAIT_S = 30.0
MIN_FREE = 4 * 2**20  # what a write asks to be free: the store and its log, and no less than this
LOW_FREE = 2**20  # an I/O error with less than this free is a full disk


def store_wait_s() -> float:
    """Seconds a statement waits for another process's lock on the store."""
    return float(settings.value("store_wait_s"))  # --store-wait, storage.wait_s, $VERISCALE_STORE_WAIT, 30


def _store_bytes(path: Path) -> int:
    total = 0
    for suffix in ("", "-wal"):
        try:
            total += os.stat(f"{path}{suffix}").st_size
        except OSError:
            pass
    return total


def _space_needed(path: Path) -> int:
    return max(MIN_FREE, _store_bytes(path))


def _disk_full(path: Path) -> bool:
    try:
        return shutil.disk_usage(path.parent).free < LOW_FREE
    except OSError:
        return False


def _holders(conn: sqlite3.Connection | None) -> str:
    """Who may hold the lock: the live veriscale runs of this host (from the runs table), else another process."""
    from veriscale.engine.run_liveness import ProcessIdentity

    live = []
    try:
        rows = conn.execute("SELECT id, command, host, boot_id, pid, pid_start FROM runs "
                            "WHERE status = 'running' ORDER BY id DESC LIMIT 50").fetchall() if conn else []
    except sqlite3.Error:
        rows = []
    for run_id, command, host, boot_id, pid, start in rows:
        if pid != os.getpid() and ProcessIdentity(host, boot_id, pid, start).alive():
            live.append(f"run {run_id} ({command}, pid {pid})")
    if live:
        return f"another process (veriscale {', '.join(live[:3])} still running here, or another program)"
    return "another process (no veriscale run of this host is running: an sqlite3 shell or another program)"


def _kind(exc: BaseException, path: Path) -> str | None:
    if isinstance(exc, OSError):
        if exc.errno == errno.ENOSPC:
            return "full"
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return "read_only"
        return None
    if not isinstance(exc, sqlite3.Error):
        return None
    name, text = getattr(exc, "sqlite_errorname", "") or "", str(exc).lower()
    if name.startswith("SQLITE_CORRUPT") or "malformed" in text or text.startswith("could not decode to utf-8"):
        return "corrupt"  # the last: bytes of a text value damaged (Python's sqlite3 says so, SQLite does not)
    if name == "SQLITE_NOTADB" or "not a database" in text:
        return "not_a_store"
    if name == "SQLITE_FULL" or "disk is full" in text:
        return "full"
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "database is locked" in text:
        return "locked"
    if name.startswith("SQLITE_READONLY") or "readonly database" in text:
        return "read_only"
    if name.startswith("SQLITE_IOERR") or "disk i/o error" in text:
        return "full" if _disk_full(path) else "io"
    if name == "SQLITE_CANTOPEN" or "unable to open database" in text:
        return "full" if _disk_full(path) else "cannot_open"
    if text.startswith(("no such table", "no such column")) or "has no column named" in text:
        return "damaged"
    if text.startswith("duplicate column name") or (text.startswith("table ") and text.endswith("already exists")):
        return "damaged"  # its tables are newer than the schema version it records (meta dropped or edited)
    return None


def fault(exc: BaseException, path: Path, *, conn: sqlite3.Connection | None = None,
          read_only: bool = False) -> StoreFault | None:
    """The one sentence for ``exc`` raised on the store at ``path`` (None: not a fault of the store)."""
    kind = _kind(exc, path)
    if kind is None:
        return None
    why = str(exc).strip() or type(exc).__name__
    if why.lower().startswith("could not decode to utf-8"):
        why = why.split(" with text ", 1)[0]  # not the damaged value itself (any length, any lines)
    store = f"store file '{path}'"
    recover = (f"recover what it holds with 'sqlite3 {path} .recover | sqlite3 {path}.recovered' and set "
               f"{setting('store')} to the recovered file, or move it aside and rerun (a new store is made; "
               "veriscale cannot read the runs and calls committed in the damaged file)")
    if kind == "corrupt":
        text = f"{store} is damaged ({why}): {recover}"
    elif kind == "not_a_store":
        text = f"{store} is not a readable veriscale store ({why}): if it was one it is damaged, so {recover}; else set {setting('store')} to another path"
    elif kind == "damaged":
        text = (f"{store} is damaged or not a veriscale store ({why}): move it aside and rerun (a new store is "
                f"made), or set {setting('store')} to another file; its other tables stay readable with sqlite3")
    elif kind == "locked":
        text = (f"{store} is locked by {_holders(conn)} for longer than the {store_wait_s():g} s wait: let it "
                f"finish and rerun, or wait longer with {setting('store_wait_s')} (seconds)")
    elif kind == "read_only":
        text = (f"{store} is read-only ({why}): read commands (runs list, runs show, runs export, runs cost) still "
                f"work; for this command set {setting('store')} to a writable path")
    elif kind == "full":
        need = _space_needed(path) / 2**20
        text = (f"{store}: its disk is full ({why}): free at least {need:.0f} MiB there (the store's size with its "
                f"log, {MIN_FREE // 2**20} MiB at the least) and rerun, or set {setting('store')} to a disk with room; "
                "every result committed before stays in the store")
    elif kind == "io":
        text = f"{store} cannot be read or written ({why}): check its disk, or set {setting('store')} to another path"
    else:
        text = f"cannot open the store at '{path}' ({why}): set {setting('store')} to a writable path"
    return StoreFault(text, "read_only" if read_only and kind == "cannot_open" else kind)


class GuardedCursor:
    """A cursor whose fetches raise a :class:`StoreFault` for a fault of the store."""

    def __init__(self, cursor: sqlite3.Cursor, conn: GuardedConnection) -> None:
        self._cursor, self._conn = cursor, conn

    @property
    def lastrowid(self) -> int | None:
        return self._cursor.lastrowid

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    def fetchone(self) -> Any:
        return self._conn.guard(self._cursor.fetchone)

    def fetchall(self) -> list[Any]:
        return self._conn.guard(self._cursor.fetchall)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class GuardedConnection:
    """The store's connection: every statement's store fault is one sentence (see the module docstring)."""

    def __init__(self, raw: sqlite3.Connection, path: Path, *, read_only: bool = False) -> None:
        self.raw, self.path, self.read_only = raw, path, read_only

    def guard(self, fn: Callable[..., _T], *args: Any) -> _T:
        try:
            return fn(*args)
        except (sqlite3.Error, OSError) as exc:
            err = fault(exc, self.path, conn=self.raw, read_only=self.read_only)
            if err is None:
                raise
            raise err from None

    def execute(self, sql: str, params: Any = ()) -> GuardedCursor:
        if sql == "ROLLBACK" and not self.raw.in_transaction:  # a full disk made SQLite roll it back already:
            sql = "SELECT 1 WHERE 0"                             # the fault that did it is what the caller raises
        return GuardedCursor(self.guard(self.raw.execute, sql, params), self)

    def executemany(self, sql: str, rows: Any) -> GuardedCursor:
        return GuardedCursor(self.guard(self.raw.executemany, sql, rows), self)

    def executescript(self, script: str) -> GuardedCursor:
        return GuardedCursor(self.guard(self.raw.executescript, script), self)

    @property
    def in_transaction(self) -> bool:
        return self.raw.in_transaction

    def close(self) -> None:
        self.raw.close()


def _connect(target: str, wait_s: float, *, uri: bool = False) -> sqlite3.Connection:
    return sqlite3.connect(target, check_same_thread=False, timeout=wait_s, isolation_level=None, uri=uri)


def _enter_wal(raw: sqlite3.Connection, wait_s: float) -> None:
    """Switch the file to WAL (a no-op once it is). SQLite answers "database is locked" at once, without
    its busy wait, while another connection holds the write lock of a file still in rollback mode (two
    processes creating one store together, as an Inspect eval's epochs do): retried until the store's
    wait runs out, as every other lock is waited for."""
    deadline = time.monotonic() + wait_s
    pause = 0.005
    while True:
        try:
            raw.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.2)


def open_connection(path: Path, migrate: Any) -> GuardedConnection:
    """``path`` opened and migrated (``migrate(conn, where)``); read-only when SQLite cannot write it."""
    wait_s = store_wait_s()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if not path.exists():
            raise StoreFault(f"cannot create the store at '{path}' ({exc.strerror}): set {setting('store')} "
                             "to a writable path", "cannot_open") from None
    raw = None
    try:
        raw = _connect(str(path), wait_s)
        _enter_wal(raw, wait_s)
        conn = GuardedConnection(raw, path)
        conn.execute("PRAGMA synchronous=NORMAL")
        migrate(conn, f"store file '{path}'")
        return conn
    except (sqlite3.Error, OSError) as exc:  # raised before the guard saw it (connect itself)
        if raw is not None:
            raw.close()
        err = fault(exc, path)
        if err is None:
            raise
        if err.kind not in ("read_only", "cannot_open") or not path.is_file():
            raise err from None
        return _open_read_only(path, wait_s, err)
    except StoreFault as err:
        if raw is not None:
            raw.close()
        if err.kind not in ("read_only", "cannot_open") or not path.is_file():
            raise
        return _open_read_only(path, wait_s, err)


def _open_read_only(path: Path, wait_s: float, why: StoreFault) -> GuardedConnection:
    """The store opened for reading only: ``mode=ro``, else ``immutable=1`` (when even its log cannot be made)."""
    from veriscale.engine.migrations import (
        SCHEMA_VERSION,
        check_tables,
        current_version,
        has_meta,
    )

    target = "file:" + quote(str(path.absolute()))
    last: BaseException = why
    for mode in ("mode=ro", "immutable=1"):
        raw = None
        try:
            raw = _connect(f"{target}?{mode}", wait_s, uri=True)
            raw.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as exc:
            if raw is not None:
                raw.close()
            last = exc
            continue
        conn = GuardedConnection(raw, path, read_only=True)
        where = f"store file '{path}'"
        check_tables(conn, where)
        version = current_version(conn) if has_meta(conn) else 1
        if version < SCHEMA_VERSION:
            conn.close()
            raise StoreFault(f"{where} is read-only and from an older veriscale (schema {version}, this one reads "
                             f"{SCHEMA_VERSION}): open it once where it is writable to upgrade it, or copy it to a "
                             f"writable path and set {setting('store')} to the copy", "read_only")
        return conn
    err = last if isinstance(last, StoreFault) else fault(last, path, read_only=True)
    raise (err or why) from None
