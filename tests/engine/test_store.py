import sqlite3

import pytest

from veriscale.engine.store import Store, call_key
from veriscale.errors import UserError


def put(store, key, status, response=None):
    store.put_call(key, model="m", fingerprint="f", prompt_version="v1", request={"x": 1},
                   status=status, response=response, error=None if status == "ok" else "boom")


def test_key_depends_on_every_part():
    base = call_key("f", "v1", {"prompt": "p", "seed": 1})
    assert base != call_key("g", "v1", {"prompt": "p", "seed": 1})
    assert base != call_key("f", "v2", {"prompt": "p", "seed": 1})
    assert base != call_key("f", "v1", {"prompt": "p", "seed": 2})
    assert base == call_key("f", "v1", {"seed": 1, "prompt": "p"})


def test_success_is_cached_and_never_overwritten_by_failure(tmp_path):
    s = Store.open(tmp_path / "s.sqlite3")
    put(s, "k", "failed")
    assert s.get_call("k") is None
    put(s, "k", "ok", {"v": 1})
    put(s, "k", "failed")
    assert s.get_call("k") == {"v": 1}


def test_store_is_plain_sqlite(tmp_path):
    path = tmp_path / "s.sqlite3"
    s = Store.open(path)
    put(s, "k", "ok", {"v": 1})
    rid = s.start_run("compare", "m", {"a": 1})
    s.finish_run(rid, "ok", {"p_a_wins": 0.7})
    con = sqlite3.connect(path)
    assert con.execute("select count(*) from calls where status='ok'").fetchone()[0] == 1
    assert con.execute("select command from runs").fetchone()[0] == "compare"


def test_a_file_that_is_not_a_store_gives_one_clear_error(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("hello, not a database" * 100)
    with pytest.raises(UserError, match="not a readable veriscale store"):
        Store.open(bad)
    assert bad.read_text().startswith("hello")  # nothing corrupted


def test_a_folder_as_store_is_refused(tmp_path):
    with pytest.raises(UserError, match="is a folder"):
        Store.open(tmp_path)
