"""The share of CPU a busy jailed session gets under each ``--jail-cpus`` quota.

    PYTHONPATH=src:. python benchmarks/bench_jail_cpu_quota.py [--quotas 0.2 0.5 1 2] [--spin 3] [--procs 2]

Each run starts a session of ``--procs`` processes spinning for ``--spin`` seconds and reads
the session cgroup's own counters (``cpuacct.usage`` / ``cpu.stat``) when it ends: CPU
seconds used, that divided by the session's duration, and the periods the quota held it back.
Without a writable cgroup cpu controller it says the quota is not enforced there.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from veriscale.harness.jail.limits import MIB, JailLimits
from veriscale.harness.jail.sandbox import JailSpec, check_jail_available, run_jailed

SPIN = """
import os, sys, time
procs, seconds = int(sys.argv[1]), float(sys.argv[2])
children = []
for _ in range(procs - 1):
    pid = os.fork()
    if pid == 0:  # a child spins and forks no further
        children = []
        break
    children.append(pid)
end = time.monotonic() + seconds
while time.monotonic() < end:
    pass
for pid in children:
    os.waitpid(pid, 0)
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quotas", type=float, nargs="+", default=[0.2, 0.5, 1.0, 2.0])
    ap.add_argument("--spin", type=float, default=3.0)
    ap.add_argument("--procs", type=int, default=2)
    args = ap.parse_args()
    check_jail_available()
    task = Path(tempfile.mkdtemp(prefix="veriscale-cpu-bench-")) / "t"
    (task / "spec").mkdir(parents=True)
    print("| quota (CPUs) | held by | CPU-s used | session s | share (CPUs) | periods throttled |")
    print("|---|---|---|---|---|---|")
    for quota in args.quotas:
        limits = JailLimits(memory_bytes=256 * MIB, pids=64, tmpfs_bytes=4 * MIB, output_bytes=4 * MIB, cpus=quota)
        spec = JailSpec(task_dir=task, writable_dir=task / "sessions" / "s", hidden=[task / "sessions"], limits=limits)
        result = run_jailed(spec, [sys.executable, "-c", SPIN, str(args.procs), str(args.spin)],
                            timeout_s=args.spin * 20 + 30)
        if result.cpu_quota_via is None or result.cpu_usage_s is None:
            print(f"| {quota:g} | not enforced here ({result.limits_via}) | - | {result.duration_s:.2f} | - | - |")
            continue
        share = result.cpu_usage_s / result.duration_s
        print(f"| {quota:g} | {result.cpu_quota_via} | {result.cpu_usage_s:.2f} | {result.duration_s:.2f} | "
              f"{share:.3f} | {result.cpu_throttled} |")


if __name__ == "__main__":
    main()
