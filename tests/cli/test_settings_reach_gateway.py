"""Every gateway setting, from each of its sources, reaches the gateway a command builds.

The commands run for real in process (typer's CliRunner) against a real HTTP server of the
tests' own (tests/support/fault_server.py); the test records each Gateway the command constructs
and reads the limits it ended up with. A setting that is parsed but dropped on the way (as
``--rpm`` once was, inside a comment) fails here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.support.fault_server import FaultServer
from veriscale.cli import app
from veriscale.cli.settings import SPEC
from veriscale.engine import gateway as gateway_module

#: setting -> (value given, how to read it back from a gateway)
GATEWAY_SETTINGS: dict[str, tuple[Any, Any]] = {
    "concurrency": (7, lambda gw: {e.concurrency for e in gw.pool.endpoints}),
    "rpm": (600, lambda gw: {e.limits.requests.per_minute if e.limits.requests else 0 for e in gw.pool.endpoints}),
    "tpm": (90000, lambda gw: {e.tokens.per_minute if e.tokens else 0 for e in gw.pool.endpoints}),
    "deadline_s": (33.0, lambda gw: {gw.deadline_s}),
    "routing": ("round_robin", lambda gw: {gw.pool.routing}),
}
SOURCES = ("flag", "env", "file")


@pytest.fixture()
def server():
    """A server of each test's own: limits are per endpoint per process, so each test gets a new one."""
    with FaultServer() as srv:
        yield srv


@pytest.fixture()
def built(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every Gateway constructed while the test runs."""
    gateways: list[Any] = []
    original = gateway_module.Gateway.__init__

    def recording(self, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        gateways.append(self)

    monkeypatch.setattr(gateway_module.Gateway, "__init__", recording)
    return gateways


def _files(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "task.md").write_text("Add two and two.")
    (tmp_path / "a.md").write_text("The answer is 4.")
    (tmp_path / "b.md").write_text("The answer is 5.")
    (tmp_path / "c.md").write_text("The answer is 22.")
    return {name: str(tmp_path / f"{name}.md") for name in ("task", "a", "b", "c")}


def _given(name: str, value: Any, source: str, tmp_path: Path) -> tuple[list[str], list[str], dict[str, str]]:
    """(global args, command args, environment) that set ``name`` to ``value`` from ``source``."""
    spec = SPEC[name]
    if source == "flag":
        args = [spec.flag, str(value)]
        return ([], args, {}) if name == "concurrency" else (args, [], {})
    if source == "env":
        return [], [], {spec.env: str(value)}
    table, key = spec.file.split(".")
    config = tmp_path / "config.toml"
    config.write_text(f"[{table}]\n{key} = {json.dumps(value)}\n")
    return ["--config", str(config)], [], {}


def _invoke(args: list[str], env: dict[str, str]) -> Any:
    result = CliRunner().invoke(app, args, env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("name", sorted(GATEWAY_SETTINGS))
def test_each_gateway_setting_reaches_the_gateway(name, source, server, built, tmp_path):
    value, read = GATEWAY_SETTINGS[name]
    files = _files(tmp_path)
    globals_, command_args, env = _given(name, value, source, tmp_path)
    models = ["--model", f"{server.url}#fault-model", "--model", f"{server.url}#fault-model"]  # two endpoints: routing applies
    _invoke([*globals_, "score", files["task"], files["a"], *models, "--store", str(tmp_path / "s.sqlite3"),
             "--json", *command_args], env)
    assert built, "the command built no gateway"
    assert read(built[-1]) == {value}


COMMANDS = {
    "score": lambda f: ["score", f["task"], f["a"]],
    "compare": lambda f: ["compare", f["task"], f["a"], f["b"]],
    "select": lambda f: ["select", "--task", f["task"], f["a"], f["b"], f["c"]],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_verdict_command_passes_the_settings_down(command, server, built, tmp_path):
    files = _files(tmp_path)
    env = {"VERISCALE_RPM": "600", "VERISCALE_DEADLINE": "33"}
    _invoke(["--tpm", "90000", *COMMANDS[command](files), "--model", f"{server.url}#fault-model", "--concurrency", "3",
             "--store", str(tmp_path / "s.sqlite3"), "--json"], env)
    gw = built[-1]
    assert {e.concurrency for e in gw.pool.endpoints} == {3}
    assert {e.limits.requests.per_minute for e in gw.pool.endpoints} == {600}
    assert {e.tokens.per_minute for e in gw.pool.endpoints} == {90000}
    assert gw.deadline_s == 33.0


@pytest.mark.parametrize("source", SOURCES)
def test_the_model_and_store_settings_reach_the_gateway(source, server, built, tmp_path):
    files = _files(tmp_path)
    uri, store = f"{server.url}#fault-model", tmp_path / f"{source}.sqlite3"
    if source == "flag":
        globals_, args, env = [], ["--model", uri, "--store", str(store)], {}
    elif source == "env":
        globals_, args, env = [], [], {"VERISCALE_MODEL": uri, "VERISCALE_STORE": str(store)}
    else:
        config = tmp_path / "config.toml"
        config.write_text(f"model = {json.dumps(uri)}\nstore = {json.dumps(str(store))}\n")
        globals_, args, env = ["--config", str(config)], [], {"VERISCALE_STORE": ""}
    _invoke([*globals_, "score", files["task"], files["a"], "--json", *args], env)
    gw = built[-1]
    assert gw.model.uri == uri
    assert Path(gw.store.path) == store


def test_a_flag_beats_the_environment_which_beats_the_file(server, built, tmp_path):
    files = _files(tmp_path)
    config = tmp_path / "config.toml"
    config.write_text("[gateway]\nrpm = 100\ntpm = 200\ndeadline_s = 300\n")
    _invoke(["--config", str(config), "--rpm", "111", "score", files["task"], files["a"], "--model",
             f"{server.url}#fault-model", "--store", str(tmp_path / "s.sqlite3"), "--json"],
            {"VERISCALE_RPM": "222", "VERISCALE_TPM": "90000"})  # a real budget: 333 tokens a minute would make each call wait
    gw = built[-1]
    assert {e.limits.requests.per_minute for e in gw.pool.endpoints} == {111}  # flag over env and file
    assert {e.tokens.per_minute for e in gw.pool.endpoints} == {90000}  # env over file
    assert gw.deadline_s == 300  # file over default


@pytest.mark.parametrize(("env", "says"), [
    ({"VERISCALE_RPM": "lots"}, "$VERISCALE_RPM = 'lots' is not a whole number"),
    ({"VERISCALE_CONCURRENCY": "0"}, "$VERISCALE_CONCURRENCY = 0 is below 1"),
    ({"VERISCALE_DEADLINE": "-3"}, "$VERISCALE_DEADLINE = -3.0 is below 0"),
    ({"VERISCALE_ROUTING": "random"}, "$VERISCALE_ROUTING = 'random' is unknown"),
])
def test_a_bad_environment_value_is_one_sentence(env, says, tmp_path):
    files = _files(tmp_path)
    result = CliRunner().invoke(app, ["score", files["task"], files["a"], "--dry-run"], env=env)
    assert result.exit_code == 2
    assert says in result.output
    assert "Traceback" not in result.output


def test_settings_command_names_each_origin(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text("[gateway]\ntpm = 5000\n[embedded]\nthreads = 2\n")
    result = CliRunner().invoke(app, ["--config", str(config), "--deadline", "30", "settings", "--json"],
                                env={"VERISCALE_RPM": "600"})
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.output)["settings"]}
    assert (rows["deadline_s"]["value"], rows["deadline_s"]["origin"]) == (30.0, "--deadline")
    assert (rows["rpm"]["value"], rows["rpm"]["origin"]) == (600, "$VERISCALE_RPM")
    assert (rows["tpm"]["value"], rows["tpm"]["origin"]) == (5000, "config file gateway.tpm")
    assert (rows["threads"]["value"], rows["threads"]["origin"]) == (2, "config file embedded.threads")
    assert (rows["concurrency"]["value"], rows["concurrency"]["origin"]) == (4, "default")
