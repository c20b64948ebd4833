"""Secrets in what leaves the store: the redactor itself, its settings, and `veriscale runs show|export`.

The server's two surfaces (REST API, dashboard) are in tests/server/test_redact_server.py; the
fake secrets are in tests/support/secrets.py. The store itself keeps the raw text (checked here).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from tests.data.dev_data_paths import DEV_DATA
from tests.support.hang_guard import guarded_run
from tests.support.secrets import KINDS, ORDINARY, PLANTED, SECRETS, SHAPES
from veriscale.cli import app
from veriscale.cli.settings import resolve
from veriscale.config import Config, load_config
from veriscale.engine.run_log import RunLog
from veriscale.engine.store import Store
from veriscale.errors import UserError
from veriscale.redact import Redactor

CUSTOM = "ACME-INTERNAL-7731-XK"  # a shape only the user's pattern knows


def planted_store(path: Path) -> tuple[Store, int, str]:
    """A store whose run args, result, one call's prompt and reply, events and steps all hold every secret."""
    st = Store.open(path)
    rid = st.start_run("select", "m", {"task": PLANTED, "note": CUSTOM})
    key = "k" * 64
    st.put_call(key, model="m", fingerprint="f", prompt_version="p", status="ok",
                request={"messages": [{"role": "user", "content": PLANTED}], "prefill": "Grade:", "labels": ["A"]},
                response={"text": PLANTED, "label_probs": {"A": 1.0}})
    st.link_call(rid, key, cache_hit=False)
    log = RunLog(st)
    log.emit(rid, "event", {"trajectory": "t", "event": {"kind": "stall", "text": PLANTED}})
    log.record_steps(rid, "t", [SimpleNamespace(role="tool", text=PLANTED, tool_calls=None, observation=CUSTOM,
                                                exit_code=0)])
    st.finish_run(rid, "ok", {"reason": {"text": PLANTED}, "notes": [PLANTED]})
    st.flush()
    return st, rid, key


def assert_redacted(text: str, custom: bool = False) -> None:
    leaked = [s for s in SECRETS if s in text]
    assert not leaked, f"secrets left in the output: {leaked}"
    missing = [k for k in KINDS if f"[redacted:{k}]" not in text]
    assert not missing, f"no marker for: {missing}"
    if custom:
        assert CUSTOM not in text and "[redacted:custom]" in text
    else:
        assert "[redacted:custom]" not in text


# -- the redactor ------------------------------------------------------------------------------

@pytest.mark.parametrize("kind,text,secret", SHAPES, ids=[f"{k}-{i}" for i, (k, _t, _s) in enumerate(SHAPES)])
def test_each_shape_becomes_a_marker_naming_its_kind_and_the_words_around_it_stay(kind, text, secret):
    out = Redactor()(text)
    assert secret not in out and f"[redacted:{kind}]" in out
    assert out == text.replace(secret, f"[redacted:{kind}]")  # only the secret itself is replaced


@pytest.mark.parametrize("text", ORDINARY)
def test_hashes_uuids_base64_and_placeholders_pass_unchanged(text):
    assert Redactor()(text) == text


def test_documents_are_walked_keys_included_and_the_input_is_left_as_it_was():
    doc = {"messages": [{"content": PLANTED}], PLANTED: 3, "n": 1.5, "ok": True, "none": None, "path": Path("/x")}
    before = json.dumps(doc, default=str)
    out = Redactor()(doc)
    assert json.dumps(doc, default=str) == before
    assert_redacted(json.dumps(out))
    assert (out["n"], out["ok"], out["none"], out["path"]) == (1.5, True, None, "/x")


def test_user_patterns_add_to_the_built_in_shapes_and_the_opt_out_returns_the_raw_value():
    r = Redactor.build([r"ACME-INTERNAL-\d+-[A-Z]+"])
    assert_redacted(r(PLANTED + " " + CUSTOM), custom=True)
    assert Redactor.build([r"ACME-\w+"], enabled=False)(PLANTED) == PLANTED


@pytest.mark.parametrize("pattern,why", [("(unclosed", "not a valid regular expression"),
                                         ("x*", "matches the empty text")])
def test_a_bad_pattern_is_one_sentence_naming_the_setting(pattern, why):
    with pytest.raises(UserError) as info:
        Redactor.build([pattern])
    assert why in str(info.value) and "redact" in str(info.value) and "\n" not in str(info.value)


def test_a_hostile_text_takes_linear_time():
    """Many key openings and a PEM header that never ends: each pass is one scan, not one per opening."""
    text = ("-----BEGIN PRIVATE KEY-----" + "A" * 50 + " sk-" + "a1" * 5 + " api_key=" + "=" * 20) * 2000
    out = Redactor()(text)  # a quadratic pattern would not finish within the test run's hang guard
    assert out.count("[redacted:private-key]") == 2000


def test_dev_candidates_are_not_redacted():
    """300 real dev candidates (120 pairwise outputs, 60 ProcessBench solutions, 60 SWE-bench and 60
    Terminal-Bench trajectories, all their strings): no false redaction. Full count:
    ``python benchmarks/bench_redact_devdata.py``."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_redact_devdata import count, dev_candidates

    report = count(dev_candidates(DEV_DATA, limit=60))
    assert report["candidates"] >= 200 and report["chars"] > 1_000_000
    assert report["findings"] == [], report["findings"][:5]


# -- settings ----------------------------------------------------------------------------------

def test_the_config_file_declares_patterns_and_the_opt_out(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[redact]\npatterns = ["ACME-INTERNAL-\\\\d+-[A-Z]+"]\nenabled = false\n')
    s = resolve(load_config(cfg), environ={})
    assert (s.redact, s.redact_secrets, s.origin("redact")) == (("ACME-INTERNAL-\\d+-[A-Z]+",), False,
                                                                 "config file redact.patterns")
    assert not s.redactor().enabled
    on = s.with_flags(redact_secrets=True).redactor(["extra-[0-9]+"])
    assert_redacted(on(PLANTED + " " + CUSTOM), custom=True)
    assert "extra-42" not in on("extra-42")


def test_a_bad_config_pattern_names_the_config_entry():
    s = resolve(Config(values={"redact.patterns": ["(b"]}), environ={})
    with pytest.raises(UserError, match=r"pattern '\(b' in config file redact.patterns is not a valid"):
        s.redactor()


# -- runs show / export ------------------------------------------------------------------------

def _cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_runs_export_and_show_redact_every_shape_and_the_store_keeps_the_raw_text(tmp_path):
    st, rid, key = planted_store(tmp_path / "s.sqlite3")
    store = ["--store", str(tmp_path / "s.sqlite3")]
    assert_redacted(_cli("runs", "export", *store))
    whole = _cli("runs", "export", str(rid), *store)
    doc = json.loads(whole)
    assert doc["calls"][0]["record"]["request"]["messages"][0]["content"].startswith("export OPENAI_API_KEY=[redacted")
    assert_redacted(whole)
    lines = _cli("runs", "export", str(rid), "--jsonl", *store).splitlines()
    assert len(lines) == 2 and json.loads(lines[1])["key"] == key
    assert_redacted("\n".join(lines))
    assert_redacted(_cli("runs", "show", str(rid), "--calls", *store))
    assert_redacted(_cli("runs", "list", "--json", *store))
    assert_redacted(_cli("runs", "export", str(rid), "--redact", r"ACME-INTERNAL-\d+-[A-Z]+", *store), custom=True)
    out = tmp_path / "run.json"
    _cli("runs", "export", str(rid), "-o", str(out), *store)
    assert_redacted(out.read_text(encoding="utf-8"))
    assert st.call(key)["request"]["messages"][0]["content"] == PLANTED  # only what leaves is redacted
    assert st.run(rid).args["task"] == PLANTED


def test_no_redact_exports_the_raw_text(tmp_path):
    _st, rid, _key = planted_store(tmp_path / "s.sqlite3")
    raw = _cli("runs", "export", str(rid), "--no-redact", "--store", str(tmp_path / "s.sqlite3"))
    assert json.loads(raw)["args"]["task"] == PLANTED


def test_the_config_file_opt_out_and_patterns_reach_runs_export(tmp_path):
    _st, rid, _key = planted_store(tmp_path / "s.sqlite3")
    cfg = tmp_path / "config.toml"
    cfg.write_text('[redact]\npatterns = ["ACME-INTERNAL-\\\\d+-[A-Z]+"]\n')
    store = ["--store", str(tmp_path / "s.sqlite3")]
    assert_redacted(_cli("--config", str(cfg), "runs", "export", str(rid), *store), custom=True)
    cfg.write_text("[redact]\nenabled = false\n")
    assert PLANTED in json.loads(_cli("--config", str(cfg), "runs", "export", str(rid), *store))["args"]["task"]


@pytest.mark.parametrize("config,flag,needle", [
    (None, ["--redact", "(unclosed"], "--redact (unclosed is not a valid regular expression"),
    ('[redact]\npatterns = ["[z-a]"]\n', [], "--redact pattern '[z-a]' in config file redact.patterns is not a valid"),
    ("[redact]\nenabled = 1\n", [], "redact.enabled must be true or false"),
])
def test_bad_redact_settings_are_one_line_on_the_command_line(tmp_path, config, flag, needle):
    _st, rid, _key = planted_store(tmp_path / "s.sqlite3")
    head = []
    if config is not None:
        (tmp_path / "c.toml").write_text(config)
        head = ["--config", str(tmp_path / "c.toml")]
    proc = guarded_run([sys.executable, "-m", "veriscale", *head, "runs", "export", str(rid), *flag,
                        "--store", str(tmp_path / "s.sqlite3")], capture_output=True, text=True)
    err = " ".join(proc.stderr.split())
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and needle in err, proc.stderr
    assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) <= 2
