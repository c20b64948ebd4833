"""Honest cost: calls, prompt tokens sent / processed / cached (unknown stays unknown), completion
tokens, wall time, and money only with a price table; ``veriscale runs cost RUN``; the store's
migration 7.

Runs come from the scripted test double through the real CLI (typer's CliRunner) or are written
straight into a real store; the none-reported case runs against a real ``llama_cpp.server``.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.scripted_model import ScriptedScoreModel, registered_scheme
from veriscale.cli import app
from veriscale.engine.prices import Price, parse_prices
from veriscale.engine.store import Store
from veriscale.errors import UserError

TASK = "Count the lines of every .log file under /var/log."


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.fixture()
def scripted_scheme():
    with registered_scheme("scripted", lambda uri: ScriptedScoreModel(), ("scripted",)):
        yield


def _recorded_run(path: Path) -> int:
    """A finished run of three calls with known tokens on two models, one cache hit and one call whose
    server did not say what it processed."""
    store = Store.open(path)
    run = store.start_run("select", "http://h/v1#m1", {})
    common = dict(fingerprint="f", prompt_version="p", request={}, status="ok", response={"label_probs": {}})
    store.put_call("k1", model="http://h/v1#m1", prompt_tokens=1000, cached_tokens=800, completion_tokens=10, **common)
    store.put_call("k2", model="http://h/v1#m1", prompt_tokens=500, cached_tokens=0, completion_tokens=5, **common)
    store.put_call("k3", model="embedded", prompt_tokens=300, processed_tokens=100, cached_tokens=200,
                   completion_tokens=0, **common)
    for key in ("k1", "k2", "k3"):
        store.link_call(run, key, cache_hit=False)
    store.link_call(run, "k1", cache_hit=True)
    store.finish_run(run, "ok", {"pick": 0})
    store.close()
    return run


def test_runs_cost_reports_sent_processed_cached_and_no_money_without_a_table(tmp_path):
    path = tmp_path / "s.sqlite3"
    run = _recorded_run(path)
    out = invoke("runs", "cost", str(run), "--json", "--store", str(path))
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert (doc["calls"], doc["cache_hits"]) == (3, 1)
    assert doc["prompt_tokens"] == 1800  # sent
    assert doc["prompt_tokens_processed"] == 200 + 500 + 100 and doc["cached_prompt_tokens"] == 800 + 0 + 200
    assert doc["completion_tokens"] == 15 and doc["unreported_calls"] == 0
    assert doc["wall_s"] is not None and doc["wall_s"] >= 0
    assert "money" not in doc  # no price table: no money column, never a made-up price
    table = invoke("runs", "cost", str(run), "--store", str(path))
    assert table.exit_code == 0, table.output
    assert "prompt tokens processed" in table.stdout and "800" in table.stdout and "money" not in table.stdout


def test_money_comes_from_the_price_table_per_model(tmp_path):
    path = tmp_path / "s.sqlite3"
    run = _recorded_run(path)
    out = invoke("runs", "cost", str(run), "--json", "--store", str(path), "--prices", "m1=2/0.5/8; embedded=0/0/0")
    assert out.exit_code == 0, out.output
    money = json.loads(out.stdout)["money"]
    # m1: 700 uncached prompt at $2/M + 800 cached at $0.5/M + 15 completion at $8/M; embedded costs 0
    assert money == {"usd": pytest.approx((700 * 2 + 800 * 0.5 + 15 * 8) / 1e6), "exact": True, "unpriced": []}
    partial = json.loads(invoke("runs", "cost", str(run), "--json", "--store", str(path),
                                "--prices", "m1=2/0.5/8").stdout)["money"]
    assert partial["usd"] is None and partial["unpriced"] == ["embedded"]  # unknown, not a partial sum


def test_the_config_files_prices_table_and_the_environment_set_prices(tmp_path, monkeypatch):
    path = tmp_path / "s.sqlite3"
    run = _recorded_run(path)
    config = tmp_path / "config.toml"
    config.write_text('[prices."http://h/v1#m1"]\nprompt = 1.0\ncompletion = 4.0\n\n'
                      '[prices.embedded]\nprompt = 0\ncompletion = 0\n')
    monkeypatch.setenv("VERISCALE_CONFIG", str(config))
    money = json.loads(invoke("runs", "cost", str(run), "--json", "--store", str(path)).stdout)["money"]
    assert money["usd"] == pytest.approx((1500 * 1.0 + 15 * 4.0) / 1e6)  # no cached price: the prompt price
    monkeypatch.setenv("VERISCALE_PRICES", "m1=3/3/3;embedded=0//0")
    money = json.loads(invoke("runs", "cost", str(run), "--json", "--store", str(path)).stdout)["money"]
    assert money["usd"] == pytest.approx(1515 * 3 / 1e6)  # the environment over the file


@pytest.mark.parametrize("text, says", [("m1=2/0.5", "is not a price entry"), ("m1=2/x/8", "is not a price"),
                                        ("m1=-1/0/0", "is not a price"), (" ; ", "is empty")])
def test_a_bad_price_table_is_one_sentence_naming_it(tmp_path, text, says):
    path = tmp_path / "s.sqlite3"
    run = _recorded_run(path)
    out = invoke("runs", "cost", str(run), "--store", str(path), "--prices", text)
    assert out.exit_code != 0 and says in out.output and "--prices" in out.output
    assert "Traceback" not in out.output


def test_a_bad_prices_table_in_the_config_file_names_the_file(tmp_path, monkeypatch):
    config = tmp_path / "config.toml"
    config.write_text('[prices.m1]\nprompt = 1.0\n')
    monkeypatch.setenv("VERISCALE_CONFIG", str(config))
    path = tmp_path / "s.sqlite3"
    out = invoke("runs", "cost", str(_recorded_run(path)), "--store", str(path))
    assert out.exit_code != 0 and str(config) in out.output and 'prices."m1"' in out.output


def test_an_unknown_run_id_is_a_clear_sentence(tmp_path):
    path = tmp_path / "s.sqlite3"
    _recorded_run(path)
    out = invoke("runs", "cost", "99", "--store", str(path))
    assert out.exit_code != 0 and "there is no run 99 in the store" in out.output and "runs list" in out.output


def test_runs_cost_of_a_run_the_cli_recorded(scripted_scheme, tmp_path):
    """A real compare run on the scripted double (which, like llama_cpp.server, does not report its
    cache): calls and tokens sent are counted, processed reads unknown, money is an upper bound."""
    store = str(tmp_path / "s.sqlite3")
    a, b = tmp_path / "a.md", tmp_path / "b.md"
    a.write_text("GOOD: find /var/log -name '*.log' -exec cat {} + | wc -l\n")
    b.write_text("echo 42\n")
    task = tmp_path / "task.md"
    task.write_text(TASK + "\n")
    out = invoke("compare", str(task), str(a), str(b), "--model", "scripted", "--json", "--store", store)
    assert out.exit_code == 0, out.output
    usage = json.loads(out.stdout)["usage"]
    assert usage["model_calls"] > 0 and usage["prompt_tokens_processed"] is None
    runs = json.loads(invoke("runs", "list", "--json", "--store", store).stdout)
    doc = json.loads(invoke("runs", "cost", str(runs[0]["id"]), "--json", "--store", store,
                            "--prices", "scripted:test-double=1/0.1/1").stdout)
    assert doc["calls"] == usage["model_calls"] and doc["prompt_tokens"] == usage["prompt_tokens_sent"] > 0
    assert doc["prompt_tokens_processed"] is None and doc["unreported_calls"] == doc["calls"]
    assert doc["money"]["exact"] is False  # every sent token priced uncached: an upper bound, said so
    table = invoke("runs", "cost", str(runs[0]["id"]), "--store", store)
    assert "unknown" in table.stdout


def test_parse_prices_reads_entries():
    assert parse_prices("openai:gpt-4.1-mini=0.40/0.10/1.60; embedded=0//0", "--prices") == (
        ("openai:gpt-4.1-mini", Price(0.40, 0.10, 1.60)), ("embedded", Price(0.0, None, 0.0)))
    with pytest.raises(UserError, match="MODEL=PROMPT/CACHED/COMPLETION"):
        parse_prices("gpt", "--prices")


def test_migration_7_makes_old_token_columns_honest(tmp_path):
    """A version-6 store: an embedded score row held the processed count in prompt_tokens (the rest in
    cached_tokens) and an HTTP row held cached_tokens 0 where its server said nothing. After migration 7
    prompt_tokens is what was sent, processed_tokens what was evaluated, and unknown is NULL."""
    from veriscale.engine import migrations
    from veriscale.engine.migrations import SCHEMA_VERSION, current_version

    path = tmp_path / "v6.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.executescript(migrations.BASE_SCHEMA)
        for version, statements in migrations.MIGRATIONS:
            if version > 6:
                break
            for sql in statements:
                conn.execute(sql)
        conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '6')")
        rows = [("emb", "embedded", "score", 30, 370, 1), ("http", "http://h/v1#m", "score", 420, 0, 1),
                ("chat", "http://h/v1#m", "chat", 50, 0, 9), ("relay", "http://up/v1", "relay", 11, 8, 3),
                ("fail", "http://h/v1#m", "score", None, None, None)]
        for key, model, kind, prompt, cached, completion in rows:
            conn.execute("INSERT INTO calls (key, model, fingerprint, prompt_version, request, status, created_at, "
                         "kind, prompt_tokens, cached_tokens, completion_tokens) VALUES (?, ?, 'f', 'p', '{}', 'ok', "
                         "1.0, ?, ?, ?, ?)", (key, model, kind, prompt, cached, completion))
    Store.open(path).close()
    with sqlite3.connect(path) as conn:
        assert current_version(conn) == SCHEMA_VERSION
        got = dict((r[0], r[1:]) for r in conn.execute(
            "SELECT key, prompt_tokens, processed_tokens, cached_tokens, completion_tokens FROM calls"))
    assert got == {"emb": (400, 30, 370, 1), "http": (420, None, None, 1), "chat": (50, None, None, 9),
                   "relay": (11, 3, 8, 3), "fail": (None, None, None, None)}


@pytest.mark.server
def test_a_real_llama_cpp_server_reports_no_cache_so_processed_stays_unknown(llama_server, tmp_path):
    from veriscale.models.uri import load_backend
    from veriscale.verify.criteria import load_criteria
    from veriscale.verify.reward import Verifier

    store = Store.open(tmp_path / "s.sqlite3")
    crits = load_criteria("general").only(["Correctness"])
    res = Verifier(load_backend(llama_server + "#smollm2"), store=store, criteria=crits,
                   scale="letters:5").compare("What is 12 * 12?", "144", "124")
    assert not res.failed, res.errors
    usage = res.usage.to_dict()
    assert usage["model_calls"] > 0 and usage["prompt_tokens_sent"] > 0 and usage["completion_tokens"] > 0
    assert usage["unreported_calls"] == usage["model_calls"]
    assert usage["prompt_tokens_processed"] is None and usage["cached_prompt_tokens"] is None  # not 0
    rows, _ = store.execute("SELECT prompt_tokens, processed_tokens, cached_tokens FROM calls")
    assert rows and all(sent > 0 and processed is None and cached is None for sent, processed, cached in rows)
    store.close()


def test_a_bench_row_carries_the_same_cost_fields_and_money_only_with_a_table():
    from veriscale.bench.configs import BenchConfig
    from veriscale.bench.bench_report import BenchRow
    from veriscale.engine.usage import CallTokens, Usage

    usage = Usage()
    usage.add_call(CallTokens(sent=1000, processed=200, cached=800, completion=10), latency_s=1.0)
    usage.add_call(CallTokens(sent=500, completion=5), latency_s=1.0)  # a server that said nothing
    row = BenchRow(BenchConfig(), "ppt", {}, usage, wall_s=2.5)
    cost = row.to_dict("http://h/v1#m1")["cost"]
    assert cost == {"calls": 2, "cache_hits": 0, "prompt_tokens_sent": 1500, "prompt_tokens_processed": None,
                    "cached_prompt_tokens": None, "completion_tokens": 15, "wall_s": 2.5}
    money = row.to_dict("http://h/v1#m1", parse_prices("m1=2/0.5/8", "--prices"))["cost"]["money"]
    # the silent call's 500 tokens are priced uncached: an upper bound, and said so
    assert money == {"usd": pytest.approx(((200 + 500) * 2 + 800 * 0.5 + 15 * 8) / 1e6), "exact": False,
                     "unpriced": []}
