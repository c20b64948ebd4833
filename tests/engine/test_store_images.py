"""The store keeps the images score calls sent, by the digest of their bytes (migration 9): written by
the gateway as it records a call, read back by digest, and pruned with the last call that sent them."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

import pytest

from tests.support.scripted_model import ScriptedScoreModel
from veriscale.data.images import ImagePart, ImageRef, load_image
from veriscale.engine import migrations
from veriscale.engine.migrations import SCHEMA_VERSION, current_version
from veriscale.engine.run_scope import recorded_run
from veriscale.engine.store import Store
from veriscale.engine.store_upkeep import prune
from veriscale.engine.sync_facade import CallExecutor, PlannedCall
from veriscale.errors import StoreFault
from veriscale.models.base import Message, ScoreRequest


def _png(color: tuple[int, int, int], size: tuple[int, int] = (8, 6)) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, "PNG")
    return out.getvalue()


def _frame(color: tuple[int, int, int], label: str) -> ImagePart:
    return load_image(ImageRef(data=_png(color), label=label))


def _call(text: str, *frames: ImagePart) -> PlannedCall:
    msg = Message.with_parts("user", [f"## Response\n{text}\n", *frames, "\n## Criterion\nc"])
    return PlannedCall(ScoreRequest(messages=(msg,), prefill="Score: ", labels=("A", "B")))


def _count(store: Store, table: str) -> int:
    return int(store.execute(f"SELECT COUNT(*) FROM {table}")[0][0][0])


def test_migration_9_adds_the_image_tables_to_a_version_8_store(tmp_path: Path) -> None:
    path = tmp_path / "v8.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.executescript(migrations.BASE_SCHEMA)
        for version, statements in migrations.MIGRATIONS:
            if version <= 8:
                for sql in statements:
                    conn.execute(sql)
        conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '8')")
        conn.execute("INSERT INTO calls (key, model, fingerprint, prompt_version, request, status, created_at) "
                     "VALUES ('k1', 'm', 'f', 'p', '{}', 'ok', 1.0)")
    store = Store.open(path)
    assert store.image("0" * 64) is None
    store.close()
    with sqlite3.connect(path) as conn:
        assert current_version(conn) == SCHEMA_VERSION >= 9
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"images", "call_images"} <= tables
        assert conn.execute("SELECT key FROM calls").fetchall() == [("k1",)]
        conn.execute("DROP TABLE images")  # a store that lost a table it should have is refused
    with pytest.raises(StoreFault, match="lacks its images table"):
        Store.open(path)


def test_put_images_keeps_each_image_once_and_reads_it_back_by_digest(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite3")
    red, blue = _frame((255, 0, 0), "frame 0"), _frame((0, 0, 255), "frame 1")
    assert store.submit(store.put_images, [red, blue, red], "k1").result() == 2
    store.put_images([red], "k2")  # the same bytes again (another label, another call): kept once, linked twice
    assert store.put_images([]) == 0
    assert store.image(red.sha256) == ("image/png", red.data)
    assert store.image(blue.sha256.upper()) == ("image/png", blue.data)
    assert store.image("f" * 64) is None
    assert _count(store, "images") == 2 and _count(store, "call_images") == 3
    rows, _ = store.execute("SELECT width, height FROM images WHERE sha256 = ?", (red.sha256,))
    assert rows == [(8, 6)]
    store.close()


def test_the_gateway_keeps_the_images_of_the_calls_it_records_and_prune_drops_them_with_the_calls(tmp_path: Path
                                                                                                  ) -> None:
    store = Store.open(tmp_path / "s.sqlite3")
    model = ScriptedScoreModel()
    ex = CallExecutor(model, store, prompt_version="t")
    red, green, blue = _frame((255, 0, 0), "f0"), _frame((0, 255, 0), "f1"), _frame((0, 0, 255), "f2")
    with recorded_run(store, "select", "scripted", {}) as old:
        ex.run([_call("GOOD one", red, green), _call("plain text")])
    with recorded_run(store, "select", "scripted", {}) as kept:
        ex.run([_call("GOOD two", green, blue), _call("GOOD one", red, green)])  # the second: a cache hit
    assert len(model.calls) == 3
    for part in (red, green, blue):
        assert store.image(part.sha256) == ("image/png", part.data)
    old_key = store.run_calls(old.id)[0]["key"]
    linked, _ = store.execute("SELECT sha256 FROM call_images WHERE call_key = ? ORDER BY sha256", (old_key,))
    assert [r[0] for r in linked] == sorted([red.sha256, green.sha256])
    request = store.call(old_key)["request"]
    assert [p["sha256"] for p in request["messages"][0]["parts"] if isinstance(p, dict)] == [red.sha256, green.sha256]

    # the old run goes (the kept one made another kind, and not linked to the old run's call): the calls
    # only it used go, and the images only those sent
    store.execute("DELETE FROM run_calls WHERE run_id = ? AND call_key = ?", (kept.id, old_key))
    store.execute("UPDATE runs SET command = 'score' WHERE id = ?", (kept.id,))
    dry = prune(store, kinds="select", dry_run=True)
    assert (dry.calls, dry.images) == (2, 1)  # red went only with the old call; green a kept call sent too
    report = prune(store, kinds="select")
    assert (report.calls, report.images) == (2, 1)
    assert store.image(red.sha256) is None
    assert store.image(green.sha256) is not None and store.image(blue.sha256) is not None
    assert _count(store, "call_images") == 2
    prune(store, kinds="score")
    assert _count(store, "images") == 0 and _count(store, "call_images") == 0
    store.close()
