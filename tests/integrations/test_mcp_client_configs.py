"""docs/INTEGRATIONS.md's MCP configuration, read by each agent CLI's own parser: the Codex CLI's
``codex mcp get --json`` reads the documented ``config.toml`` tables, and Claude Code's ``claude mcp
add`` / ``claude mcp get`` registers the documented command and connects to ``veriscale mcp`` over
stdio. The real npm binaries (scripts/install-test-tools.sh puts them in .tools/), in scratch homes."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".tools" / "node_modules" / ".bin"
DOC = (REPO / "docs" / "INTEGRATIONS.md").read_text(encoding="utf-8")
TIMEOUT_S = 120


def _cli(name: str) -> Path:
    path = BIN / name
    assert path.exists(), f"{path} is missing: run sh scripts/install-test-tools.sh"
    return path


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "HOME": str(home), "CODEX_HOME": str(home / ".codex"), "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_codex_reads_the_documented_config_toml(tmp_path):
    block = re.search(r"`~/.codex/config.toml`:\n\n```toml\n(.*?)```", DOC, re.S)
    assert block, "docs/INTEGRATIONS.md lost its Codex config.toml block"
    runs = tmp_path / "runs"
    runs.mkdir()
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "config.toml").write_text(block.group(1).replace("/path/to/agent-runs", str(runs)))
    env = _env(tmp_path)
    stdio = json.loads(subprocess.run([str(_cli("codex")), "mcp", "get", "veriscale", "--json"], env=env,
                                      capture_output=True, text=True, timeout=TIMEOUT_S, check=True).stdout)
    assert stdio["transport"]["type"] == "stdio"
    assert stdio["transport"]["command"] == "veriscale"
    assert stdio["transport"]["args"] == ["mcp", "--allow-dir", str(runs)]
    http = json.loads(subprocess.run([str(_cli("codex")), "mcp", "get", "veriscale-http", "--json"], env=env,
                                     capture_output=True, text=True, timeout=TIMEOUT_S, check=True).stdout)
    assert http["transport"]["type"] == "streamable_http" and http["transport"]["url"] == "http://127.0.0.1:8767/mcp"


def test_claude_code_adds_the_documented_command_and_connects_to_it(tmp_path):
    line = next(x for x in DOC.splitlines() if x.startswith("claude mcp add veriscale -- veriscale mcp"))
    runs = tmp_path / "runs"
    runs.mkdir()
    args = shlex.split(line.split("#")[0].replace("/path/to/agent-runs", str(runs)))
    assert args[:5] == ["claude", "mcp", "add", "veriscale", "--"]
    env = _env(tmp_path)
    work = tmp_path / "project"
    work.mkdir()
    added = subprocess.run([str(_cli("claude")), *args[1:]], env=env, cwd=work, capture_output=True, text=True,
                           timeout=TIMEOUT_S)
    assert added.returncode == 0, added.stdout + added.stderr
    got = subprocess.run([str(_cli("claude")), "mcp", "get", "veriscale"], env=env, cwd=work, capture_output=True,
                         text=True, timeout=TIMEOUT_S)
    out = got.stdout + got.stderr
    assert "Connected" in out, out  # it started `veriscale mcp --allow-dir ...` and spoke MCP with it
    flat = " ".join(out.split())
    assert "Type: stdio Command: veriscale" in flat and f"Args: mcp --allow-dir {runs}" in flat, flat
