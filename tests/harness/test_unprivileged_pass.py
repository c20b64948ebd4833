"""The jail suites again, as the unprivileged user ``scripts/install-test-tools.sh`` creates.

CI runs as root, the case that matters most; this reruns every jail test as a normal user, whose
sessions run in a user namespace instead. The source tree is copied where that user can read it
(the checkout and the test interpreter may sit below /root) and run with ``/usr/bin/python3``'s
venv from the install script.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CI_USER = "veriscale-ci"
VENV_PYTHON = Path(f"/home/{CI_USER}/venv/bin/python")
SUITES = ["tests/harness/test_jail.py", "tests/harness/test_jail_findings.py",
          "tests/harness/test_jail_limits.py", "tests/harness/test_jail_hostile.py",
          "tests/harness/test_jail_cpu.py", "tests/harness/test_relay_gate.py",
          "tests/harness/test_jail_host_io.py", "tests/harness/test_host_io.py",
          "tests/harness/test_zip_bombs.py", "tests/harness/test_jail_proc_view.py",
          "tests/harness/test_relay_body_policy.py"]


@pytest.mark.skipif(os.geteuid() != 0, reason="this run is itself the unprivileged pass")
def test_jail_suites_pass_as_an_unprivileged_user() -> None:
    assert VENV_PYTHON.exists(), f"{VENV_PYTHON} is missing: run sh scripts/install-test-tools.sh as root first"
    work = Path(tempfile.mkdtemp(prefix="veriscale-unpriv-", dir="/tmp"))
    try:
        for name in ("src", "tests", "pyproject.toml"):
            source = REPO / name
            if source.is_dir():
                shutil.copytree(source, work / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
            else:
                shutil.copy2(source, work / name)
        subprocess.run(["chown", "-R", f"{CI_USER}:{CI_USER}", str(work)], check=True)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": f"/home/{CI_USER}", "LANG": "C.UTF-8",
               "PYTHONPATH": f"{work / 'src'}:{work}", "TMPDIR": "/tmp"}
        done = subprocess.run(
            [shutil.which("runuser") or "/usr/sbin/runuser", "-u", CI_USER, "--", str(VENV_PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider",
             *SUITES],
            cwd=work, env=env, capture_output=True, text=True, timeout=900,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    summary = re.search(r"(\d+) passed", output)
    assert summary and int(summary.group(1)) >= 60 and "failed" not in output.splitlines()[-1], output[-3000:]
