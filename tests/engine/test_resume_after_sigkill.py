"""A run killed with SIGKILL mid-way resumes without repeating any finished call."""

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tests.support.fault_server import FaultServer

EX = Path(__file__).resolve().parents[2] / "examples" / "pair"


def ok_calls(store: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5)
        return con.execute("select count(*) from calls where status='ok'").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_sigkill_then_rerun_repeats_no_finished_call(tmp_path):
    store = tmp_path / "s.sqlite3"
    with FaultServer(delay_s=0.25) as srv:
        cmd = [sys.executable, "-m", "veriscale", "compare", str(EX / "task.md"), str(EX / "a.md"), str(EX / "b.md"),
               "--model", srv.url + "#fault-model", "--concurrency", "1", "--store", str(store), "--json"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.time() + 60
        while ok_calls(store) < 4 and time.time() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        done = ok_calls(store)
        assert 4 <= done < 12
        con = sqlite3.connect(store)
        assert con.execute("pragma integrity_check").fetchone()[0] == "ok"
        con.close()

        rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert rerun.returncode == 0, rerun.stderr
        out = json.loads(rerun.stdout)
        assert out["usage"]["model_calls"] == 12 - done
        assert out["usage"]["cache_hits"] == done
        assert out["p_a_wins"] is not None
