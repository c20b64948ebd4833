"""Versioned changes to the store's schema, applied in order when a store is opened.

The version lives in the ``meta`` table (``schema_version``; a store from before migrations
has none and is version 1). Each migration runs in one transaction with its version bump, so a
store is always at exactly one version; a store newer than this veriscale is refused::

    version = migrate(conn)        # -> SCHEMA_VERSION, after applying what was missing

Add a migration by appending ``(N, [sql, ...])`` to :data:`MIGRATIONS`; never edit one that
has shipped (a test opens a store written by the first release and checks every row survives).
"""

from __future__ import annotations

from typing import Any, Protocol

from veriscale.errors import StoreFault, UserError, setting

BASE_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    prompt_version TEXT NOT NULL,
    request TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),  -- 'cancelled' too, from migration 6
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

MIGRATIONS: list[tuple[int, list[str]]] = [
    (2, [
        # what kind of call (a score slot, a chat turn, traffic an external agent sent through the jail relay)
        "ALTER TABLE calls ADD COLUMN kind TEXT NOT NULL DEFAULT 'score'",
        "ALTER TABLE calls ADD COLUMN prompt_tokens INTEGER",
        "ALTER TABLE calls ADD COLUMN cached_tokens INTEGER",
        "ALTER TABLE calls ADD COLUMN completion_tokens INTEGER",
        # every call a run used, cache hits included, in the order it used them
        """CREATE TABLE run_calls (
               id INTEGER PRIMARY KEY AUTOINCREMENT,
               run_id INTEGER NOT NULL REFERENCES runs(id),
               call_key TEXT NOT NULL,
               cache_hit INTEGER NOT NULL,
               label TEXT,
               at REAL NOT NULL)""",
        "CREATE INDEX run_calls_by_run ON run_calls(run_id)",
        "ALTER TABLE runs ADD COLUMN parent_id INTEGER REFERENCES runs(id)",
    ]),
    (3, [
        # what a run reported while it ran (progress points, events, call counts), in order: the
        # server streams these to the dashboard, from this process or any other writing the store
        """CREATE TABLE run_events (
               id INTEGER PRIMARY KEY AUTOINCREMENT,
               run_id INTEGER NOT NULL REFERENCES runs(id),
               kind TEXT NOT NULL,
               data TEXT NOT NULL,
               at REAL NOT NULL)""",
        "CREATE INDEX run_events_by_run ON run_events(run_id, id)",
        # the steps of each trajectory a run looked at, for the trajectory viewer
        """CREATE TABLE run_steps (
               run_id INTEGER NOT NULL REFERENCES runs(id),
               trajectory TEXT NOT NULL,
               idx INTEGER NOT NULL,
               role TEXT NOT NULL,
               text TEXT NOT NULL,
               error INTEGER NOT NULL,
               PRIMARY KEY (run_id, trajectory, idx))""",
        # jobs submitted to `veriscale serve`; unfinished ones resume when the server restarts
        """CREATE TABLE jobs (
               id INTEGER PRIMARY KEY AUTOINCREMENT,
               kind TEXT NOT NULL,
               params TEXT NOT NULL,
               status TEXT NOT NULL,
               run_id INTEGER REFERENCES runs(id),
               error TEXT,
               attempts INTEGER NOT NULL DEFAULT 0,
               cancel_requested INTEGER NOT NULL DEFAULT 0,
               created_at REAL NOT NULL,
               started_at REAL,
               finished_at REAL)""",
        "CREATE INDEX runs_by_command ON runs(command, id)",
        "CREATE INDEX runs_by_parent ON runs(parent_id)",
    ]),
    (4, [
        # who runs a run, so a reader can tell a live one from one whose process died
        # (veriscale.engine.run_liveness): host, boot id, pid and the pid's start time in clock
        # ticks after boot (/proc/<pid>/stat field 22: a reused pid has another), and a heartbeat
        "ALTER TABLE runs ADD COLUMN host TEXT",
        "ALTER TABLE runs ADD COLUMN boot_id TEXT",
        "ALTER TABLE runs ADD COLUMN pid INTEGER",
        "ALTER TABLE runs ADD COLUMN pid_start INTEGER",
        "ALTER TABLE runs ADD COLUMN heartbeat_at REAL",
        "CREATE INDEX runs_by_status ON runs(status)",
    ]),
    (5, [
        # in-flight claims on calls (one call, one payment, across processes): the owner
        # (host:pid:token, later host:pid:token:boot_id:start) renews expires_at while its call runs and deletes the row when the
        # outcome is committed; a waiter takes over a row whose owner stopped renewing it
        """CREATE TABLE call_leases (
               key TEXT PRIMARY KEY,
               owner TEXT NOT NULL,
               expires_at REAL NOT NULL,
               taken_at REAL NOT NULL)""",
    ]),
    (6, [
        # a call stopped before it finished is 'cancelled' (it was 'failed' with an error starting
        # "cancelled"): SQLite cannot change a CHECK, so the table is rebuilt with every row
        """CREATE TABLE calls_v6 (
               key TEXT PRIMARY KEY,
               model TEXT NOT NULL,
               fingerprint TEXT NOT NULL,
               prompt_version TEXT NOT NULL,
               request TEXT NOT NULL,
               status TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'cancelled')),
               response TEXT,
               error TEXT,
               latency_s REAL,
               created_at REAL NOT NULL,
               kind TEXT NOT NULL DEFAULT 'score',
               prompt_tokens INTEGER,
               cached_tokens INTEGER,
               completion_tokens INTEGER)""",
        """INSERT INTO calls_v6 (key, model, fingerprint, prompt_version, request, status, response, error,
                                 latency_s, created_at, kind, prompt_tokens, cached_tokens, completion_tokens)
           SELECT key, model, fingerprint, prompt_version, request,
                  CASE WHEN status = 'failed' AND error LIKE 'cancelled%' THEN 'cancelled' ELSE status END,
                  response, error, latency_s, created_at, kind, prompt_tokens, cached_tokens, completion_tokens
           FROM calls""",
        "DROP TABLE calls",
        "ALTER TABLE calls_v6 RENAME TO calls",
    ]),
    (7, [
        # honest cost: prompt_tokens is what was sent, processed_tokens what the model evaluated and
        # cached_tokens what it served from a cache; NULL in the last two means the model did not say.
        # Before, an embedded score call's prompt_tokens held the processed count (its cached_tokens the
        # rest), and an HTTP call's cached_tokens held 0 where the server said nothing
        "ALTER TABLE calls ADD COLUMN processed_tokens INTEGER",
        """UPDATE calls SET processed_tokens = prompt_tokens, prompt_tokens = prompt_tokens + COALESCE(cached_tokens, 0)
           WHERE kind = 'score' AND model LIKE 'embedded%' AND prompt_tokens IS NOT NULL""",
        """UPDATE calls SET cached_tokens = NULL
           WHERE kind IN ('score', 'chat') AND processed_tokens IS NULL AND cached_tokens = 0""",
        """UPDATE calls SET processed_tokens = prompt_tokens - cached_tokens
           WHERE processed_tokens IS NULL AND cached_tokens IS NOT NULL AND prompt_tokens IS NOT NULL""",
    ]),
    (8, [
        # a step's structure for the trajectory viewer (JSON: tool calls, their results, the observation,
        # exit code, per-step time and tokens); NULL for steps stored before, shown from their text alone
        "ALTER TABLE run_steps ADD COLUMN detail TEXT",
    ]),
    (9, [
        # the images score calls sent, by the digest of their bytes (a request keeps only the digest):
        # what the dashboard shows of a judgement; call_images links each call to its images, so a
        # prune drops the images no kept call sent; its label is what that call named the image
        """CREATE TABLE images (
               sha256 TEXT PRIMARY KEY,
               mime TEXT NOT NULL,
               width INTEGER,
               height INTEGER,
               data BLOB NOT NULL)""",
        """CREATE TABLE call_images (
               call_key TEXT NOT NULL,
               sha256 TEXT NOT NULL,
               label TEXT NOT NULL DEFAULT '',
               PRIMARY KEY (call_key, sha256))""",
        "CREATE INDEX call_images_by_sha256 ON call_images(sha256)",
    ]),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]


class Rows(Protocol):
    """What a statement gives back: a ``sqlite3.Cursor``, or the store's guarded one."""

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """What the migrations need of a connection: a raw ``sqlite3.Connection``, or the store's
    :class:`veriscale.engine.store_faults.GuardedConnection`."""

    def execute(self, sql: str, parameters: Any = ..., /) -> Rows: ...

    def executescript(self, script: str, /) -> object: ...


#: The tables a store of each schema version has (the base ones, then those migrations added).
TABLES_SINCE: dict[int, tuple[str, ...]] = {1: ("calls", "runs", "meta"), 2: ("run_calls",),
                                            3: ("run_events", "run_steps", "jobs"), 5: ("call_leases",),
                                            9: ("images", "call_images")}


def has_meta(conn: Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone() is not None


def check_tables(conn: Connection, where: str = "the store") -> None:
    """Refuse, in one sentence, a store whose recorded version promises a table it lacks (one
    dropped or lost): recreating it empty would hide the loss behind errors about its columns."""
    if not has_meta(conn):
        return  # a new file, or one from before migrations: the base schema is (re)made
    version = current_version(conn)
    have = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()}
    missing = [t for since, names in TABLES_SINCE.items() if since <= version for t in names if t not in have]
    if missing:
        raise StoreFault(f"{where} is damaged: it lacks its {', '.join(missing)} table{'s' * (len(missing) > 1)} "
                         f"(schema version {version}): move it aside and rerun (a new store is made), or set "
                         f"{setting('store')} to another file; its other tables stay readable with sqlite3", "damaged")


def current_version(conn: Connection) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 1


def migrate(conn: Connection, where: str = "the store") -> int:
    """Bring ``conn``'s schema up to :data:`SCHEMA_VERSION`; returns the version it ends at."""
    check_tables(conn, where)
    conn.executescript(BASE_SCHEMA)
    version = current_version(conn)
    if version > SCHEMA_VERSION:
        raise UserError(f"{where} has schema version {version}, newer than this veriscale knows ({SCHEMA_VERSION}): "
                        f"upgrade veriscale, or set {setting('store')} to another file")
    for target, statements in MIGRATIONS:
        if target <= version:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            if current_version(conn) >= target:  # another process migrated it meanwhile
                conn.execute("COMMIT")
                version = target
                continue
            for sql in statements:
                conn.execute(sql)
            conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
                         "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (str(target),))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        version = target
    return version
