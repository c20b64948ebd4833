"""The SQLite store: every model call and every run, committed as it completes.

Readable with any SQLite tool (tables ``calls``, ``runs``, ``run_calls``, ``meta``, and ``images``
with ``call_images``: the bytes of the images score calls sent, by digest; ``run_events``
and ``run_steps`` belong to :mod:`veriscale.engine.run_log`, ``jobs`` to the server; the schema
changes only through :mod:`veriscale.engine.migrations`). A call is keyed by a hash of the
model fingerprint, prompt-template version, prompt and parameters; a rerun finds every call
that already succeeded, so a killed run resumes without repeating finished work. ``run_calls``
links each run to every call it used, cache hits included::

    store = Store.open()                      # per-user data dir, or Store.open("x.sqlite3")
    key = call_key(fingerprint, "v1", request_dict)
    if (hit := store.get_call(key)) is None:
        store.put_call(key, ..., status="ok", response=resp_dict)

The gateway never writes on its event loop: it hands writes to the store's one writer thread
(``await asyncio.wrap_future(store.submit(store.put_call, key, ...))``); every read from another
thread first waits for the writes already handed over, so a reader sees them.

The store's other concepts live beside it: the writer thread (:mod:`.store_writer`), in-flight
claims on calls (:mod:`.call_leases`: one call, one payment, across processes) and the runs
table (:mod:`.run_records`); ``Store`` combines them over one connection.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import hashlib
import json
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol, TypeVar

import platformdirs

from veriscale.engine.call_leases import CallLeases, lease_owner
from veriscale.engine.migrations import migrate
from veriscale.engine.run_records import RunRecord, RunRecords
from veriscale.engine.store_faults import GuardedConnection, open_connection
from veriscale.engine.store_writer import StoreWriter
from veriscale.errors import UserError, setting

_T = TypeVar("_T")


class KeptImage(Protocol):
    """What the store keeps of an image (``veriscale.data.images.ImagePart`` is one)."""

    @property
    def sha256(self) -> str: ...
    @property
    def mime(self) -> str: ...
    @property
    def width(self) -> int: ...
    @property
    def height(self) -> int: ...
    @property
    def data(self) -> bytes: ...
    @property
    def label(self) -> str: ...

__all__ = ["KeptImage", "RunRecord", "Store", "call_key", "default_store_path", "lease_owner"]


def default_store_path() -> Path:
    """``$VERISCALE_STORE`` if set, else ``<user data dir>/veriscale/store.sqlite3``."""
    from veriscale import settings

    env = settings.from_environment("store")  # through the one reader (a path, ~ expanded)
    if env is not None:
        return Path(env)
    return Path(platformdirs.user_data_dir("veriscale")) / "store.sqlite3"


#: Version of the chat-call cache key (messages, tools, parameters, seed).
CHAT_KEY_VERSION = "chat-v1"


def call_key(fingerprint: str, prompt_version: str, request: dict[str, Any]) -> str:
    """Stable hash of everything that determines a model call's answer."""
    blob = json.dumps([fingerprint, prompt_version, request], sort_keys=True, ensure_ascii=False)
    try:
        data = blob.encode("utf-8")
    except UnicodeEncodeError as exc:  # a backstop: inputs are checked where they are read (data.reader)
        raise UserError(f"a prompt holds a lone UTF-16 surrogate (U+{ord(blob[exc.start]):04X}), which no UTF-8 text "
                        "can hold: remove it from the task or candidate") from None
    return hashlib.sha256(data).hexdigest()


_OPEN_STORES: weakref.WeakSet[Store] = weakref.WeakSet()


def _flush_open_stores() -> None:
    """At exit: finish the writes handed to writer threads (they are daemon threads)."""
    for store in list(_OPEN_STORES):
        try:
            store.flush(timeout=30.0)
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            pass


atexit.register(_flush_open_stores)


class Store(CallLeases, RunRecords):
    """Thread-safe access to one SQLite file (WAL mode, one commit per write)."""

    def __init__(self, conn: GuardedConnection | sqlite3.Connection, path: Path) -> None:
        self._conn = conn if isinstance(conn, GuardedConnection) else GuardedConnection(conn, path)
        self._lock = threading.Lock()
        self.path = path
        self._writer: StoreWriter | None = None
        self._writer_lock = threading.Lock()
        _OPEN_STORES.add(self)

    # -- the writer thread -----------------------------------------------------------
    def submit(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> concurrent.futures.Future[_T]:
        """Run ``fn(*args, **kwargs)`` (a method of this store) on the store's one writer thread,
        after every job submitted before it; the future holds its result."""
        with self._writer_lock:
            if self._writer is None:
                self._writer = StoreWriter()
                weakref.finalize(self, self._writer.stop)
        return self._writer.submit(fn, args, kwargs)

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every submitted job is done."""
        if self._writer is not None:
            self._writer.flush(timeout)

    def _settle(self) -> None:
        """Before a read: let the writes already handed over land (no-op when none are pending)."""
        if self._writer is not None and self._writer.pending:
            self._writer.flush()

    @classmethod
    def open(cls, path: str | Path | None = None) -> Store:
        """The store at ``path``: writable, or read-only when SQLite cannot write it (:attr:`read_only`);
        a damaged, locked or full store is one sentence (:mod:`veriscale.engine.store_faults`)."""
        p = Path(path) if path is not None else default_store_path()
        if p.exists() and p.is_dir():
            raise UserError(f"store path '{p}' is a folder: set {setting('store')} to a file path such as {p / 'store.sqlite3'}")
        return cls(open_connection(p, migrate), p)

    @property
    def read_only(self) -> bool:
        """Opened for reading only (a read-only mount or file): every write is refused in one sentence."""
        return self._conn.read_only

    def close(self) -> None:
        self.flush()
        if self._writer is not None:
            self._writer.stop()
            self._writer.thread.join()
            self._writer = None
        _OPEN_STORES.discard(self)
        with self._lock:
            self._conn.close()

    # -- calls -------------------------------------------------------------------------
    def get_call(self, key: str) -> dict[str, Any] | None:
        """The stored response of a successful call, or None."""
        self._settle()
        with self._lock:
            row = self._conn.execute("SELECT response FROM calls WHERE key = ? AND status = 'ok'", (key,)).fetchone()
            return self._response(key, row[0]) if row else None

    def _response(self, key: str, text: str | None) -> dict[str, Any] | None:
        """A stored response decoded; one cut short (not JSON) is a cache miss, and its row is marked
        failed so the call is made again (the caller holds the store's lock)."""
        try:
            return json.loads(text) if text is not None else None
        except (TypeError, ValueError, RecursionError):
            if not self.read_only:
                self._conn.execute("UPDATE calls SET status = 'failed', error = ? WHERE key = ? AND status = 'ok'",
                                   ("its stored response was cut short (not JSON): the call is made again", key))
            return None

    def get_calls(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        """The stored responses of those ``keys`` whose calls succeeded."""
        self._settle()
        found: dict[str, dict[str, Any]] = {}
        unique = list(dict.fromkeys(keys))
        with self._lock:
            for i in range(0, len(unique), 500):
                chunk = unique[i:i + 500]
                rows = self._conn.execute(
                    f"SELECT key, response FROM calls WHERE status = 'ok' AND key IN ({','.join('?' * len(chunk))})",
                    chunk).fetchall()
                found.update((k, hit) for k, r in rows if (hit := self._response(k, r)) is not None)
        return found

    def put_call(self, key: str, *, model: str, fingerprint: str, prompt_version: str,
                 request: dict[str, Any], status: str, response: dict[str, Any] | None = None,
                 error: str | None = None, latency_s: float | None = None, kind: str = "score",
                 prompt_tokens: int | None = None, cached_tokens: int | None = None,
                 completion_tokens: int | None = None, processed_tokens: int | None = None) -> None:
        """Commit one call's outcome. A success is never overwritten by a later failure.
        ``prompt_tokens`` were sent; ``processed_tokens``/``cached_tokens`` None: the model did not say
        (with only ``cached_tokens`` given, processed is the rest of the prompt)."""
        if processed_tokens is None and cached_tokens is not None and prompt_tokens is not None:
            processed_tokens = max(0, prompt_tokens - cached_tokens)
        with self._lock:
            self._conn.execute(
                """INSERT INTO calls (key, model, fingerprint, prompt_version, request, status,
                                      response, error, latency_s, created_at, kind, prompt_tokens,
                                      cached_tokens, completion_tokens, processed_tokens)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT(key) DO UPDATE SET status=excluded.status, response=excluded.response,
                       error=excluded.error, latency_s=excluded.latency_s, created_at=excluded.created_at,
                       prompt_tokens=excluded.prompt_tokens, cached_tokens=excluded.cached_tokens,
                       completion_tokens=excluded.completion_tokens, processed_tokens=excluded.processed_tokens
                   WHERE calls.status != 'ok' OR excluded.status = 'ok'""",
                (key, model, fingerprint, prompt_version, json.dumps(request, ensure_ascii=False),
                 status, json.dumps(response) if response is not None else None, error, latency_s,
                 time.time(), kind, prompt_tokens, cached_tokens, completion_tokens, processed_tokens),
            )

    def link_call(self, run_id: int, key: str, *, cache_hit: bool, label: str | None = None) -> None:
        """Record that run ``run_id`` used call ``key`` (a cache hit or not)."""
        with self._lock:
            self._conn.execute("INSERT INTO run_calls (run_id, call_key, cache_hit, label, at) VALUES (?, ?, ?, ?, ?)",
                               (run_id, key, int(cache_hit), label, time.time()))

    def run_calls(self, run_id: int) -> list[dict[str, Any]]:
        """Every call run ``run_id`` used, in order, with its kind, status, tokens and latency."""
        self._settle()
        with self._lock:
            rows = self._conn.execute(
                """SELECT rc.call_key, rc.cache_hit, rc.label, c.kind, c.status, c.prompt_tokens,
                          c.cached_tokens, c.completion_tokens, c.latency_s, c.error, c.processed_tokens, c.model
                   FROM run_calls rc LEFT JOIN calls c ON c.key = rc.call_key
                   WHERE rc.run_id = ? ORDER BY rc.id""", (run_id,)).fetchall()
        names = ("key", "cache_hit", "label", "kind", "status", "prompt_tokens", "cached_tokens",
                 "completion_tokens", "latency_s", "error", "processed_tokens", "model")
        return [dict(zip(names, (r[0], bool(r[1]), *r[2:]))) for r in rows]

    def run_cost(self, run_id: int) -> dict[str, Any]:
        """Totals over a run's calls and those of its child runs (harness tasks): :func:`veriscale.engine.run_cost.totals`."""
        from veriscale.engine.run_cost import totals

        ids = [run_id] + [r.id for r in self.child_runs(run_id)]
        return totals([call for rid in ids for call in self.run_calls(rid)])

    def count_calls(self, status: str | None = None) -> int:
        self._settle()
        with self._lock:
            if status:
                return int(self._conn.execute("SELECT COUNT(*) FROM calls WHERE status = ?", (status,)).fetchone()[0])
            return int(self._conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    def iter_calls(self) -> Iterator[dict[str, Any]]:
        self._settle()
        with self._lock:
            rows = self._conn.execute(
                "SELECT key, model, status, error, latency_s, created_at FROM calls ORDER BY created_at"
            ).fetchall()
        for r in rows:
            yield {"key": r[0], "model": r[1], "status": r[2], "error": r[3], "latency_s": r[4], "created_at": r[5]}

    def call(self, key: str) -> dict[str, Any] | None:
        """One call's whole record (request, response or error, tokens, latency), or None."""
        self._settle()
        with self._lock:
            row = self._conn.execute(
                """SELECT key, model, kind, status, request, response, error, latency_s, created_at, prompt_tokens,
                          cached_tokens, completion_tokens, processed_tokens FROM calls WHERE key = ?""",
                (key,)).fetchone()
        if row is None:
            return None
        names = ("key", "model", "kind", "status", "request", "response", "error", "latency_s", "created_at",
                 "prompt_tokens", "cached_tokens", "completion_tokens", "processed_tokens")
        record = dict(zip(names, row))
        try:
            record["request"] = json.loads(record["request"])
        except (TypeError, ValueError, RecursionError):
            record["request"], record["damaged"] = None, ["request"]
        if record["response"]:
            with self._lock:
                record["response"] = self._response(key, record["response"])
            if record["response"] is None:
                record["damaged"] = [*record.get("damaged", []), "response"]
        return record

    def execute(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> tuple[list[tuple[Any, ...]], int | None]:
        """Run one statement under the store's lock: ``(rows, lastrowid)``. For the modules that own
        the newer tables (``run_log``, the server's jobs); everything else has a method here."""
        self._settle()
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

    def transaction(self, fn: Callable[[GuardedConnection], _T]) -> _T:
        """``fn(conn)`` in one ``BEGIN IMMEDIATE`` transaction under the store's lock, after the writes
        already handed over: committed when it returns, rolled back when it raises. For a write of
        many statements that must land whole (:mod:`veriscale.engine.store_upkeep`'s prune)."""
        self._settle()
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(self._conn)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            return result

    # -- images ------------------------------------------------------------------------
    def put_images(self, parts: Iterable[KeptImage], call_key: str | None = None) -> int:
        """Keep the bytes of ``parts`` (``veriscale.data.images.ImagePart``) by their digest, once each
        (one already kept is left as it is), and link them to call ``call_key`` when given (a prune drops
        the images no kept call links to). One transaction; returns how many parts were given. Writers
        hand it to the writer thread (``store.submit(store.put_images, parts, key)``)."""
        unique: dict[str, KeptImage] = {}
        for p in parts:
            unique.setdefault(p.sha256, p)  # the same bytes twice in one call: its first label
        if not unique:
            return 0
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                self._conn.executemany(
                    "INSERT OR IGNORE INTO images (sha256, mime, width, height, data) VALUES (?, ?, ?, ?, ?)",
                    [(sha, p.mime, p.width, p.height, p.data) for sha, p in unique.items()])
                if call_key is not None:
                    self._conn.executemany(
                        "INSERT OR IGNORE INTO call_images (call_key, sha256, label) VALUES (?, ?, ?)",
                        [(call_key, sha, p.label or "") for sha, p in unique.items()])
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
        return len(unique)

    def image(self, sha256: str) -> tuple[str, bytes] | None:
        """A kept image's type and bytes by the digest of its bytes, or None."""
        self._settle()
        with self._lock:
            row = self._conn.execute("SELECT mime, data FROM images WHERE sha256 = ?", (sha256.lower(),)).fetchone()
        return (str(row[0]), bytes(row[1])) if row else None

    def call_images(self, call_key: str) -> dict[str, dict[str, Any]]:
        """The images call ``call_key`` sent, by digest: the label it gave each, its type and size, and
        whether its bytes are kept (``kept``); one sent before images were kept is absent."""
        self._settle()
        with self._lock:
            rows = self._conn.execute(
                """SELECT ci.sha256, ci.label, i.mime, i.width, i.height, i.sha256 IS NOT NULL
                   FROM call_images ci LEFT JOIN images i ON i.sha256 = ci.sha256 WHERE ci.call_key = ?""",
                (call_key,)).fetchall()
        return {r[0]: {"label": r[1], "mime": r[2], "width": r[3], "height": r[4], "kept": bool(r[5])} for r in rows}

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
