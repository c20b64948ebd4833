"""The CPU quota of one session: a busy loop is held to it, measured by the session cgroup's counters.

The quota is the cgroup cpu controller's bandwidth limit (``cpu.cfs_quota_us`` on v1, ``cpu.max``
on v2). Where no writable cpu controller exists (an unprivileged run, a v2 host without the cpu
controller delegated) the quota is not enforced: the test then checks that the limits line says
so and warns that the quota went untested here; it never passes silently as if it held.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

from tests.harness.jail_probe import session_spec
from veriscale.errors import UserError
from veriscale.harness.jail.limits import MIB, JailLimits, ResourceBox, describe_limits
from veriscale.harness.jail.sandbox import check_jail_available, run_jailed

QUOTA = 0.2  # CPUs: well under what two spinning processes take on any machine, busy or idle
SPIN = """
import os, time
def spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
child = os.fork()
spin(3.0)
if child == 0:
    os._exit(0)
os.waitpid(child, 0)
print("spun")
"""


@pytest.fixture(scope="module", autouse=True)
def jail_available() -> None:
    check_jail_available()


def limits(cpus: float) -> JailLimits:
    return JailLimits(memory_bytes=256 * MIB, pids=64, cpu_s=60, tmpfs_bytes=4 * MIB, output_bytes=4 * MIB,
                      capture_bytes=64 * 1024, cpus=cpus)


def test_a_busy_loop_is_held_to_the_sessions_cpu_quota(layout: dict[str, Path]) -> None:
    result = run_jailed(session_spec(layout, limits=limits(QUOTA)), [sys.executable, "-c", SPIN], timeout_s=120)
    assert result.returncode == 0 and "spun" in result.stdout, result.stderr
    if result.cpu_quota_via is None:
        assert f"CPU quota {QUOTA:g} CPUs (not enforced" in result.limits_line, result.limits_line
        warnings.warn(f"CPU quota untested here ({result.limits_via}, no writable cgroup cpu controller): "
                      "the limits line says it is not enforced", stacklevel=1)
        return
    assert result.cpu_quota_via in ("cgroup v1 cpu.cfs_quota_us", "cgroup v2 cpu.max")
    assert f"CPU quota {QUOTA:g} CPUs ({result.cpu_quota_via})" in result.limits_line
    assert result.cpu_usage_s is not None and result.cpu_throttled is not None
    # Two spinners for 3 s each want 6 CPU-seconds; the cgroup may hand out QUOTA per second of the
    # session (plus the last period's slack), and it says it held them back.
    share = result.cpu_usage_s / result.duration_s
    assert share <= QUOTA * 1.25 + 0.05 / result.duration_s, (result.cpu_usage_s, result.duration_s)
    assert result.cpu_throttled > 0 and result.cpu_usage_s > 0


def test_the_quota_is_written_where_the_kernel_reads_it() -> None:
    with ResourceBox(limits(1.5)) as box:
        if box.cpu_via is None:
            assert "CPU quota 1.5 CPUs (not enforced" in box.describe()
            warnings.warn(f"CPU quota untested here ({box.kind}): no writable cgroup cpu controller", stacklevel=1)
            return
        folder = next(Path(f).parent for f in box.enter_files if (Path(f).parent / "cpu.cfs_quota_us").exists()
                      or (Path(f).parent / "cpu.max").exists())
        if box.cpu_via.startswith("cgroup v1"):
            assert (folder / "cpu.cfs_quota_us").read_text().strip() == "150000"
            assert (folder / "cpu.cfs_period_us").read_text().strip() == "100000"
        else:
            assert (folder / "cpu.max").read_text().split() == ["150000", "100000"]
        usage = box.cpu_usage()
        assert usage is not None and usage.seconds == 0  # nothing has run in it yet
    assert not folder.exists(), "the session's cgroup goes with the session"


@pytest.mark.parametrize("bad", [0, -1, 0.001, 5000, "1", True, float("nan")])
def test_a_bad_quota_gets_one_sentence(bad: object) -> None:
    with pytest.raises(UserError, match="is not a number of CPUs from 0.01 to 1024"):
        JailLimits(cpus=bad)  # type: ignore[arg-type]


def test_the_up_front_line_names_the_quota() -> None:
    assert "CPU quota 1 CPU (cgroup cpu controller, where writable)" in describe_limits(JailLimits(), "cgroup v1")
    assert "CPU quota 2 CPUs (not enforced" in describe_limits(JailLimits(cpus=2), "rlimits")


def test_the_flag_refuses_a_bad_quota_in_one_sentence(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from veriscale.cli import app

    result = CliRunner().invoke(app, ["harness", "jail-run", str(tmp_path), "--jail-cpus", "0", "--", "true"])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "is not a number of CPUs from 0.01 to 1024" in result.output and "--jail-cpus 1" in result.output
