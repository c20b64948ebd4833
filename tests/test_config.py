"""The config file: where it is read from, what it may say, and flag > env > file > default."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from veriscale.config import TABLES, GatewaySettings, load_config
from veriscale.errors import UserError
from veriscale.settings.sections import PROXY, REWARDS, SERVER, section

GOOD = """
model = "qwen"
store = "~/stores/v.sqlite3"

[gateway]
concurrency = 4
rpm = 120
routing = "round_robin"

[models.qwen]
endpoints = ["http://127.0.0.1:8001/v1#q", "http://127.0.0.1:8002/v1#q"]

[server]
port = 8080
"""


def test_a_full_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(GOOD)
    cfg = load_config(path)
    assert cfg.model == "qwen" and cfg.store == Path("~/stores/v.sqlite3").expanduser()
    assert cfg.gateway == GatewaySettings(concurrency=4, rpm=120, routing="round_robin")
    assert cfg.model_uris(["qwen", "embedded"]) == ["http://127.0.0.1:8001/v1#q", "http://127.0.0.1:8002/v1#q", "embedded"]
    assert cfg.tables["server"] == {"port": 8080} and cfg.values["server.port"] == 8080  # checked like every table


def test_no_file_means_defaults_and_the_env_var_points_at_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("veriscale.config.default_config_path", lambda: tmp_path / "absent.toml")
    monkeypatch.delenv("VERISCALE_CONFIG", raising=False)
    assert load_config(None).path is None and load_config(None).gateway.concurrency == 4
    (tmp_path / "c.toml").write_text('model = "embedded"\n')
    monkeypatch.setenv("VERISCALE_CONFIG", str(tmp_path / "c.toml"))
    assert load_config(None).model == "embedded"


def test_precedence_is_flag_then_env_then_file_then_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A section setting (the server's token) goes by the one rule the global settings use."""
    (tmp_path / "c.toml").write_text('[server]\ntoken = "from-file"\n')
    cfg, empty = load_config(tmp_path / "c.toml"), load_config("/dev/null")
    monkeypatch.setenv("VERISCALE_TOKEN", "from-env")
    assert section(SERVER, cfg, {"token": "from-flag"})["token"] == "from-flag"
    assert section(SERVER, cfg)["token"] == "from-env"
    monkeypatch.delenv("VERISCALE_TOKEN")
    assert section(SERVER, cfg)["token"] == "from-file"
    assert section(SERVER, empty)["token"] is None


def test_every_section_setting_has_a_checked_place_in_the_file() -> None:
    """A section key the file's tables do not list could never be read from the file (or would go unchecked)."""
    for spec in (*SERVER, *REWARDS, *PROXY):
        table, key = spec.file.split(".", 1)
        assert key in TABLES[table], spec.name


@pytest.mark.parametrize("text, fragment", [
    ("model = 3\n", "model must be text"),
    ("[gateway]\nspeed = 1\n", "has no setting 'speed'"),
    ("[gateway]\nconcurrency = 0\n", "below 1"),
    ("[gateway]\nrouting = 'random'\n", "routing 'random' is unknown"),
    ("[models.q]\nendpoints = []\n", "must list model URIs"),
    ("model = \n", "not valid TOML"),
    ("[proxy]\nverifer = 'x'\n", r"\[proxy\] has no setting 'verifer'"),  # one table list checks [proxy] too
    ("[proxy]\naliases = 'a=b'\n", "proxy.aliases must be a table"),
    ("proxy = 3\n", r"\[proxy\] must be a table"),
])
def test_bad_files_are_one_clear_error(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(UserError, match=fragment):
        load_config(path)


def test_a_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        load_config(tmp_path / "nope.toml")


def test_dev_null_is_read_as_an_empty_config_file() -> None:
    config = load_config("/dev/null")  # it exists: the usual way to say "no config file"
    assert config.path == Path("/dev/null") and config.model is None and config.values == {}


def test_a_folder_given_as_the_config_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="is a folder, not a file"):
        load_config(tmp_path)


def test_a_pipe_given_as_the_config_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)  # reading it would wait for a writer forever
    with pytest.raises(UserError, match="is not a regular file"):
        load_config(fifo)


def test_veriscale_config_dev_null_runs_the_command(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from veriscale.cli import app

    env = {"VERISCALE_CONFIG": "/dev/null", "VERISCALE_STORE": str(tmp_path / "s.sqlite3")}
    result = CliRunner().invoke(app, ["runs", "list"], env=env)
    assert result.exit_code == 0, result.output
    assert "does not exist" not in result.output


def test_every_proxy_key_the_file_sets_reaches_the_settings_by_one_path(tmp_path: Path) -> None:
    """No [proxy] key is copied by hand: each one the file sets is in ``values`` as proxy.KEY."""
    path = tmp_path / "config.toml"
    path.write_text("[proxy]\nschedule = 'early'\nbudget = 'calls=6'\nmargin = 0.2\n[proxy.aliases]\nfast = 'm*2'\n")
    values = load_config(path).values
    assert {k: v for k, v in values.items() if k.startswith("proxy.")} == {
        "proxy.schedule": "early", "proxy.budget": "calls=6", "proxy.margin": 0.2, "proxy.aliases": {"fast": "m*2"}}
