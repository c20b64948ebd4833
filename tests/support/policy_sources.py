"""Give ``injection_policy`` by one source for a test: the global flag, the environment or the config file.

    front = policy_given("env", "exclude", tmp_path, monkeypatch)   # [] ; $VERISCALE_INJECTION_POLICY set
    front = policy_given("flag", "exclude", tmp_path, monkeypatch)  # ["--injection-policy", "exclude"]

The config file is written in ``folder`` (empty unless ``source == "file"``) and named by
``$VERISCALE_CONFIG``, so the machine's own config never leaks in.
"""

from __future__ import annotations

from pathlib import Path

import pytest


def policy_given(source: str, policy: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    config = folder / "config.toml"
    config.write_text(f'[injection]\npolicy = "{policy}"\n' if source == "file" else "")
    monkeypatch.setenv("VERISCALE_CONFIG", str(config))
    monkeypatch.delenv("VERISCALE_INJECTION_POLICY", raising=False)
    if source == "env":
        monkeypatch.setenv("VERISCALE_INJECTION_POLICY", policy)
    return ["--injection-policy", policy] if source == "flag" else []
