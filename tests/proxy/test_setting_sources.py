"""Each [proxy] setting that has a flag reaches the proxy's settings from the flag, the environment
or the config file, and the resolved settings say which source it came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from veriscale.config import load_config
from veriscale.proxy.settings import proxy_settings

# setting, flag value, environment value, config line, what the proxy's settings hold
CASES = {
    "proxy_schedule": ("early", "early", 'schedule = "early"', "early"),
    "proxy_budget": ("calls = 6", "CALLS=6", 'budget = "calls=6"', "calls=6"),
}


@pytest.mark.parametrize("source", ["flag", "env", "file"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_proxy_setting_comes_from_flag_environment_or_file(tmp_path: Path, name: str, source: str) -> None:
    from veriscale.cli.settings import resolve

    flag_value, env_value, line, held = CASES[name]
    key, env = name.removeprefix("proxy_"), f"VERISCALE_{name.upper()}"
    config = tmp_path / "config.toml"
    config.write_text("[proxy]\nmargin = 0.2\n" + (line + "\n" if source == "file" else ""))
    cfg = load_config(config)
    resolved = resolve(cfg, {name: flag_value if source == "flag" else None}, {env: env_value} if source == "env" else {})
    assert getattr(resolved, name) == held
    assert resolved.origin(name) == {"flag": f"--{name.replace('_', '-')}", "env": f"${env}",
                                     "file": f"config file proxy.{key}"}[source]
    settings = proxy_settings(resolved, fallback_model="m", n=3)
    assert settings is not None and getattr(settings, key) == held and settings.margin == 0.2
