"""The joint setting reaches every Verifier: --joint, $VERISCALE_JOINT, [scoring] joint, [rewards] joint."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.scripted_model import ScriptedScoreModel, registered_scheme
from veriscale.settings import source as setting_source
from veriscale.cli import app
from veriscale.verify import joint as joint_scoring


@pytest.fixture()
def scripted(monkeypatch):
    setting_source.choose({})  # the CLI callback chooses it; start from none
    monkeypatch.delenv(joint_scoring.JOINT_ENV, raising=False)
    with registered_scheme("scripted", lambda uri: ScriptedScoreModel(), ("scripted",)):
        yield


def files(tmp_path: Path) -> list[str]:
    out = []
    for name, text in (("task", "Count the lines."), ("a", "GOOD: wc -l"), ("b", "echo 42")):
        (tmp_path / f"{name}.md").write_text(text + "\n")
        out.append(str(tmp_path / f"{name}.md"))
    return out


def compare(tmp_path: Path, *before: str, config: Path | None = None):
    args = [*(["--config", str(config)] if config else []), *before, "compare", *files(tmp_path), "--model",
            "scripted", "--criteria", "agent", "--store", str(tmp_path / "s.sqlite3"), "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout[result.stdout.index("{"):])


def test_joint_flag_makes_compare_one_call_per_slot_order(scripted, tmp_path):
    assert compare(tmp_path)["usage"]["model_calls"] == 12
    joint = compare(tmp_path, "--joint")
    assert joint["usage"]["model_calls"] == 2
    assert joint["p_a_wins"] > 0.5


def test_joint_from_the_config_file_and_the_environment(scripted, tmp_path, monkeypatch):
    config = tmp_path / "config.toml"
    config.write_text("[scoring]\njoint = true\n")
    assert compare(tmp_path, config=config)["usage"]["model_calls"] == 2
    monkeypatch.setenv("VERISCALE_JOINT", "off")  # the environment over the file
    assert compare(tmp_path, config=config)["usage"]["model_calls"] == 12
    config.write_text("[scoring]\njoint = \"sometimes\"\n")
    monkeypatch.delenv("VERISCALE_JOINT")
    result = CliRunner().invoke(app, ["--config", str(config), "compare", *files(tmp_path), "--model", "scripted"])
    assert result.exit_code != 0 and "scoring.joint" in result.output and "Traceback" not in result.output


def test_rewards_table_turns_joint_on_for_trainer_verifiers(scripted, tmp_path, monkeypatch):
    from veriscale.rewards.configure import reward_verifier

    config = tmp_path / "config.toml"
    config.write_text('[rewards]\nmodel = "scripted"\njoint = true\n')
    monkeypatch.setenv("VERISCALE_CONFIG", str(config))
    assert reward_verifier().joint is True
    config.write_text('[rewards]\nmodel = "scripted"\n')
    assert reward_verifier().joint is False
    config.write_text('[rewards]\nmodel = "scripted"\njoint = "yes"\n')
    with pytest.raises(Exception, match="rewards.joint must be true or false"):
        reward_verifier()
