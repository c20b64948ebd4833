"""Issue 30, "Numbers in, numbers out": NaN and infinity are refused in one sentence where they come in
(labels, flags, the config file, the price table), ``--json`` is strict JSON always, ``--task`` overrides
the runs' own tasks, and a config file's unknown keys are named. All in process: no model is called."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from veriscale.cli import app
from veriscale.cli.common import emit_json, positive_seconds
from veriscale.config import load_config
from veriscale.errors import UserError


def _strict(text: str):
    def refuse(word: str):
        raise AssertionError(f"not strict JSON: {word}")
    return json.loads(text, parse_constant=refuse)


def invoke(*args: str, env: dict[str, str] | None = None, tmp_path: Path | None = None):
    store = ["--store", str(tmp_path / "s.sqlite3")] if tmp_path is not None else []
    return CliRunner().invoke(app, ["--config", "/dev/null", *args, *store], env=env)


def one_sentence(result, *needles: str) -> str:
    assert result.exit_code not in (0, None), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    text = " ".join(result.output.split())
    assert "Traceback" not in text and "error:" in text, text
    for needle in needles:
        assert needle in text, text
    return text


def _pool(path: Path, rewards: list[str], tasks: list[str] | None = None) -> Path:
    lines = []
    for i, reward in enumerate(rewards):
        task = tasks[i] if tasks else "How many lines does data.csv have?"
        lines.append(f'{{"id": "run-{i}", "reward": {reward}, "messages": [{{"role": "user", "content": "{task}"}}, '
                     f'{{"role": "assistant", "content": "It has {40 + i} lines."}}]}}')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# 1. --json is valid JSON always --------------------------------------------------------------------------

@pytest.mark.parametrize("reward", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_non_finite_label_is_refused_at_the_input(tmp_path: Path, reward: str) -> None:
    pool = _pool(tmp_path / "runs.jsonl", ["1", reward])
    result = invoke("select", str(pool), "--dry-run", "--json", tmp_path=tmp_path)
    one_sentence(result, "runs.jsonl", "label reward", "not a finite number")


def test_finite_labels_still_select(tmp_path: Path) -> None:
    result = invoke("select", str(_pool(tmp_path / "runs.jsonl", ["1", "0.5"])), "--dry-run", "--json",
                    tmp_path=tmp_path)
    assert result.exit_code == 0, result.output
    assert _strict(result.stdout)["dry_run"] is True


def test_emit_json_writes_null_for_nan_and_infinity(capsys) -> None:
    emit_json({"a": float("nan"), "b": [float("inf"), 1.5, {"c": float("-inf")}], "d": "text"})
    out = capsys.readouterr()
    assert _strict(out.out) == {"a": None, "b": [None, 1.5, {"c": None}], "d": "text"}
    assert "3 value(s) were not finite numbers" in " ".join(out.err.split())


# 2. non-finite settings ----------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-5"])
def test_track_follow_idle_timeout_must_be_finite_and_positive(tmp_path: Path, value: str) -> None:
    steps = tmp_path / "steps.jsonl"
    steps.write_text("", encoding="utf-8")
    result = invoke("track", "--follow", str(steps), "--idle-timeout", value, tmp_path=tmp_path)
    one_sentence(result, "--idle-timeout")
    assert not (tmp_path / "steps.jsonl.progress.json").exists()  # refused before following


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_global_numeric_flags_and_env_refuse_non_finite(tmp_path: Path, value: str) -> None:
    one_sentence(invoke("--deadline", value, "settings"), "--deadline", "finite")
    one_sentence(invoke("settings", env={"VERISCALE_RUN_STALE_S": value}), "$VERISCALE_RUN_STALE_S", "finite")


def test_positive_seconds() -> None:
    assert positive_seconds(None, "--x", "1") is None and positive_seconds(2.5, "--x", "1") == 2.5
    for bad in (float("nan"), float("inf"), 0.0):
        with pytest.raises(UserError, match="--x"):
            positive_seconds(bad, "--x", "1")


# 3. the price table ------------------------------------------------------------------------------------

def test_garbage_prices_are_refused_naming_the_variable(tmp_path: Path) -> None:
    pool = _pool(tmp_path / "runs.jsonl", ["1", "0"])
    one_sentence(invoke("select", str(pool), "--dry-run", env={"VERISCALE_PRICES": "garbage"}, tmp_path=tmp_path),
                 "$VERISCALE_PRICES", "not a price entry")
    one_sentence(invoke("settings", env={"VERISCALE_PRICES": "m=nan/0/1"}), "$VERISCALE_PRICES", "not a price")
    ok = invoke("select", str(pool), "--dry-run", env={"VERISCALE_PRICES": "m=1/0.5/2"}, tmp_path=tmp_path)
    assert ok.exit_code == 0, ok.output


def test_a_bad_prices_table_in_the_file_is_named(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[prices.m]\nprompt = "cheap"\ncompletion = 1\n', encoding="utf-8")
    result = CliRunner().invoke(app, ["--config", str(cfg), "settings"])
    one_sentence(result, "c.toml", "prices", "not a price")


# 4. the config file ------------------------------------------------------------------------------------

def test_unknown_config_keys_are_named_with_their_count(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("".join(f"key{i} = 1\n" for i in range(300_000)), encoding="utf-8")
    assert len(load_config(cfg).unknown) == 300_000
    result = CliRunner().invoke(app, ["--config", str(cfg), "settings"])
    text = " ".join(result.output.split())
    assert result.exit_code == 0, text
    assert "300,000 key(s) veriscale does not read ('key0', 'key1', 'key2', 'key3', 'key4' and 299,995 more)" in text


def test_known_config_keys_give_no_note(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('model = "embedded"\n[gateway]\nrpm = 10\n[server]\n', encoding="utf-8")
    assert load_config(cfg).unknown_note() is None


@pytest.mark.parametrize("text", ["a = " + "[" * 2000 + "]" * 2000 + "\n",
                                  "a = " + "{b = " * 2000 + "1" + "}" * 2000 + "\n",
                                  "[" + ".".join(["x"] * 2000) + "]\nk = 1\n"])
def test_a_config_nested_2000_deep_is_one_sentence(tmp_path: Path, text: str) -> None:
    cfg = tmp_path / "deep.toml"
    cfg.write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match="deep"):
        load_config(cfg)
    one_sentence(CliRunner().invoke(app, ["--config", str(cfg), "settings"]), "deep.toml", "deep")


@pytest.mark.parametrize("line", ["[gateway]\ndeadline_s = nan", "[proxy]\ntimeout_s = inf", "[view]\ntimeout_s = -inf"])
def test_nan_and_inf_in_the_config_are_refused(tmp_path: Path, line: str) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(line + "\n", encoding="utf-8")
    one_sentence(CliRunner().invoke(app, ["--config", str(cfg), "settings"]), "c.toml", "not a finite number")


# 5. --task overrides the runs' own tasks ----------------------------------------------------------------

def test_task_overrides_runs_of_different_tasks(tmp_path: Path) -> None:
    a = _pool(tmp_path / "a.jsonl", ["1"], tasks=["Count the lines of a.csv"])
    b = _pool(tmp_path / "b.jsonl", ["0"], tasks=["Count the words of b.txt"])
    refused = invoke("select", str(a), str(b), "--dry-run", tmp_path=tmp_path)
    one_sentence(refused, "2 different tasks", "--task")
    task = tmp_path / "task.md"
    task.write_text("Count what there is to count.\n", encoding="utf-8")
    result = invoke("select", "--task", str(task), str(a), str(b), "--dry-run", "--json", tmp_path=tmp_path)
    assert result.exit_code == 0, result.output
    plan = _strict(result.stdout)
    assert plan["n_candidates"] == 2
    assert "overrides the 2 different tasks" in " ".join(result.stderr.split())
