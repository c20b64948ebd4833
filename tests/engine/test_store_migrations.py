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
