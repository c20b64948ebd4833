"""What the crash and fault suites share: real ``veriscale`` processes against the fault server,
results compared without their timestamps, store checks.

    out = run_cli(["select", ...], store)                   # a whole run: its --json output
    proc = start_cli(["select", ...], store); srv.kill_at(proc.pid, 7)   # killed when call 7 arrives
    assert comparable(out) == comparable(baseline)
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.hang_guard import watch

REPO = Path(__file__).resolve().parents[2]
#: every key whose value says when or how fast, or which run or process: not part of a verdict
VOLATILE = {"run_id", "usage", "latency_s", "created_at", "finished_at", "at", "elapsed_s", "notes", "calls_saved",
            "cost", "job", "key", "keys", "call_keys", "calls",
            "model", "cache_hits", "prompt_tokens", "completion_tokens", "prompt_tokens_total",
            "cached_prompt_tokens"}  # cost, not verdict; call keys and model URIs embed the fault server's port
#: hang guard for one CLI process (generous: a loaded CI machine is slow, a hang is endless)
PROCESS_TIMEOUT_S = 600


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a child ``veriscale``: no config file, and a killed run's heartbeat goes
    stale after 1 s (so it reads ``interrupted`` by the time the rerun has finished)."""
    env = {**os.environ, "VERISCALE_CONFIG": "", "VERISCALE_RUN_STALE_S": "1", **extra}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env


def start_cli(args: list[str], store: Path, **env: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "veriscale", *args, "--store", str(store), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(**env),
                            cwd=REPO)


def run_cli(args: list[str], store: Path, **env: str) -> dict[str, Any]:
    proc = start_cli(args, store, **env)
    fired = watch(proc)  # a hang is no CPU progress, however slow the machine
    out, err = proc.communicate()
    assert not fired.is_set(), f"veriscale {' '.join(args[:2])} hung: {err[-2000:]}"
    assert proc.returncode == 0, f"exit {proc.returncode}: {err[-2000:]}"
    return json.loads(out)


def comparable(doc: Any) -> Any:
    """``doc`` without volatile keys, floats rounded to 1e-6 (the suites' definition of equal)."""
    if isinstance(doc, dict):
        return {k: comparable(v) for k, v in doc.items() if k not in VOLATILE}
    if isinstance(doc, list):
        return [comparable(v) for v in doc]
    if isinstance(doc, float):
        return round(doc, 6)
    return doc


def store_check(store: Path) -> dict[str, Any]:
    """Integrity, ok calls and how many runs still say ``running``."""
    conn = sqlite3.connect(store, timeout=30)
    try:
        return {"integrity": conn.execute("PRAGMA integrity_check").fetchone()[0],
                "ok_calls": conn.execute("SELECT COUNT(*) FROM calls WHERE status = 'ok'").fetchone()[0],
                "ok_keys": {r[0] for r in conn.execute("SELECT key FROM calls WHERE status = 'ok'")},
                "running": conn.execute("SELECT COUNT(*) FROM runs WHERE status = 'running'").fetchone()[0]}
    finally:
        conn.close()


def request_fingerprint(request: dict[str, Any]) -> str:
    """One upstream request's identity (its body), to count repeats."""
    return json.dumps(request["body"], sort_keys=True)
