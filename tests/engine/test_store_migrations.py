"""A store written by the first release opens with this one, migrates, and keeps every row."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from veriscale.engine.migrations import SCHEMA_VERSION, current_version
from veriscale.engine.store import Store
from veriscale.errors import UserError

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "store" / "store-v0.1.0.sqlite3"


def _rows(path: Path, table: str, columns: str) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        return conn.execute(f"SELECT {columns} FROM {table} ORDER BY 1").fetchall()


def test_the_first_releases_store_migrates_and_keeps_every_row(tmp_path: Path) -> None:
    copy = tmp_path / "old.sqlite3"
    shutil.copy(FIXTURE, copy)
    calls_before = _rows(copy, "calls", "key, model, fingerprint, prompt_version, request, status, response, error")
    runs_before = _rows(copy, "runs", "id, command, model, args, status, result, created_at, finished_at")
    meta_before = _rows(copy, "meta", "key, value")
    assert len(calls_before) == 2 and len(runs_before) == 3  # control: the fixture has rows

    store = Store.open(copy)
    with sqlite3.connect(copy) as conn:
        assert current_version(conn) == SCHEMA_VERSION
    assert _rows(copy, "calls", "key, model, fingerprint, prompt_version, request, status, response, error") == calls_before
    assert _rows(copy, "runs", "id, command, model, args, status, result, created_at, finished_at") == runs_before
    assert [r for r in _rows(copy, "meta", "key, value") if r[0] != "schema_version"] == meta_before
    assert _rows(copy, "calls", "kind") == [("score",), ("score",)]

    ok_key = next(k for k, *_rest, status, _resp, _err in calls_before if status == "ok")
    assert store.get_call(ok_key)["label_probs"] == {"A": 0.7, "B": 0.3}
    assert [r.command for r in store.runs()] == ["score", "select", "compare"]
    run = store.start_run("compare", "embedded", {})  # the new tables work on the old file
    store.link_call(run, ok_key, cache_hit=True)
    assert store.run_calls(run)[0]["cache_hit"] is True
    store.close()
    Store.open(copy).close()  # opening again is a no-op


def test_a_store_from_a_newer_veriscale_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite3"
    Store.open(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    with pytest.raises(UserError, match="newer than this veriscale"):
        Store.open(path)


def test_migration_6_marks_cancelled_calls_and_keeps_the_rest(tmp_path: Path) -> None:
    """A version-5 store's calls that were cancelled (then 'failed', "cancelled ...") become 'cancelled';
    every other row and column is unchanged, and the new status is allowed by the table."""
    from veriscale.engine import migrations

    path = tmp_path / "v5.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.executescript(migrations.BASE_SCHEMA)
        for _version, statements in migrations.MIGRATIONS[:4]:  # up to and including 5
            for sql in statements:
                conn.execute(sql)
        conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '5')")
        rows = [("k1", "ok", None, 11), ("k2", "failed", "cancelled before it finished (rerun to ask again)", 12),
                ("k3", "failed", "the server answered 500", 13)]
        for key, status, error, tokens in rows:
            conn.execute("INSERT INTO calls (key, model, fingerprint, prompt_version, request, status, response, "
                         "error, latency_s, created_at, kind, prompt_tokens) VALUES (?, 'm', 'f', 'p', '{}', ?, NULL, "
                         "?, 0.5, 1.0, 'score', ?)", (key, status, error, tokens))
    before = _rows(path, "calls", "key, model, error, latency_s, created_at, kind, prompt_tokens")
    Store.open(path).close()
    assert _rows(path, "calls", "key, status") == [("k1", "ok"), ("k2", "cancelled"), ("k3", "failed")]
    assert _rows(path, "calls", "key, model, error, latency_s, created_at, kind, prompt_tokens") == before
    with sqlite3.connect(path) as conn:
        assert current_version(conn) == SCHEMA_VERSION
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("UPDATE calls SET status = 'maybe' WHERE key = 'k1'")
