"""Call rows travelling between stores: a Ray worker's scratch store and the driver's, which alone
writes the user's store. A row is a dict of :data:`CALL_COLUMNS` (request and response decoded)::

    feed = CallFeed(scratch, run_id)          # on the worker, once the seeds are in
    batch = feed.new()                        # {"calls": [rows written or changed since], "links": [...]}
    put_rows(driver_store, batch["calls"])    # on the driver
    rows_of_keys(store, keys, "AND status = 'ok'")
"""

from __future__ import annotations

import json
import threading
from typing import Any

#: the columns of a call row that travel between the worker's scratch store and the driver's
CALL_COLUMNS = ("key", "model", "fingerprint", "prompt_version", "request", "status", "response", "error",
                "latency_s", "kind", "prompt_tokens", "cached_tokens", "completion_tokens", "processed_tokens")


def _decoded(row: tuple[Any, ...]) -> dict[str, Any]:
    data = dict(zip(CALL_COLUMNS, row))
    data["request"] = json.loads(data["request"]) if data["request"] else {}
    data["response"] = json.loads(data["response"]) if data["response"] else None
    return data


def call_rows(store: Any, where: str = "", params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    """Call rows of ``store`` as dicts (request and response decoded)."""
    rows, _ = store.execute(f"SELECT {', '.join(CALL_COLUMNS)} FROM calls {where}", params)
    return [_decoded(row) for row in rows]


def rows_of_keys(store: Any, keys: list[str], where: str = "") -> list[dict[str, Any]]:
    """The call rows of ``keys`` (looked up by the calls table's primary key, 500 at a time), in the
    order of ``keys``; ``where``: a further condition (``"AND status = 'ok'"``)."""
    unique = list(dict.fromkeys(keys))
    found: dict[str, dict[str, Any]] = {}
    for i in range(0, len(unique), 500):
        chunk = unique[i:i + 500]
        for row in call_rows(store, f"WHERE key IN ({','.join('?' * len(chunk))}) {where}", tuple(chunk)):
            found[row["key"]] = row
    return [found[k] for k in unique if k in found]


def put_rows(store: Any, rows: list[dict[str, Any]]) -> None:
    """Commit call rows (from :func:`call_rows`) into ``store``."""
    for row in rows:
        rest = {k: v for k, v in row.items() if k != "key"}
        store.put_call(row["key"], **rest)


#: the scratch store's change log: every insert or update of a call row appends its key, so the feed
#: reads only what changed since its last read (an upsert keeps a row's rowid, so a rowid watermark
#: over ``calls`` alone would miss a row updated in place)
_FEED_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS feed_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, call_key TEXT NOT NULL)",
    "CREATE TRIGGER IF NOT EXISTS feed_insert AFTER INSERT ON calls BEGIN "
    "INSERT INTO feed_log (call_key) VALUES (NEW.key); END",
    "CREATE TRIGGER IF NOT EXISTS feed_update AFTER UPDATE ON calls BEGIN "
    "INSERT INTO feed_log (call_key) VALUES (NEW.key); END",
)


class CallFeed:
    """What of the scratch store the driver has not been sent yet: the call rows written or changed
    since the last :meth:`new` (a watermark over the store's change log) and the run's new links."""

    def __init__(self, store: Any, run_id: int) -> None:
        self.store, self.run_id = store, run_id
        self.lock = threading.Lock()  # a unit's calls may finish on threads of its own
        for sql in _FEED_SCHEMA:
            store.execute(sql)
        rows, _ = store.execute("SELECT COALESCE(MAX(seq), 0) FROM feed_log")
        self.last_seq = int(rows[0][0])  # what is in the store already (the seeds): the driver has it
        self.last_link = 0
        self.rows_read = 0  # call rows read so far (each change once)

    def new(self) -> dict[str, Any]:
        """The changes since the last call. The links are read first: a call's row is written before
        its link, so the rows read after them hold every linked call's outcome (read the other way,
        a call finishing between the two reads would arrive linked with its row still in flight)."""
        with self.lock:
            self.store.flush()
            links, _ = self.store.execute("SELECT rowid, call_key, cache_hit, label FROM run_calls WHERE run_id = ? "
                                          "AND rowid > ? ORDER BY rowid", (self.run_id, self.last_link))
            if links:
                self.last_link = links[-1][0]
            changed, _ = self.store.execute("SELECT seq, call_key FROM feed_log WHERE seq > ? ORDER BY seq",
                                            (self.last_seq,))
            calls: list[dict[str, Any]] = []
            if changed:
                self.last_seq = changed[-1][0]
                calls = rows_of_keys(self.store, [key for _, key in changed])
                self.rows_read += len(calls)
            return {"calls": calls,
                    "links": [{"key": k, "cache_hit": bool(h), "label": lab} for _, k, h, lab in links]}
