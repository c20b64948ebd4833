"""A Bradley–Terry fit with BLAS on one thread (veriscale's) against BLAS's own thread count, in one run.

    python benchmarks/bench_bt_threads.py                 # the machine as it is
    python benchmarks/bench_bt_threads.py --load 4        # plus 4 busy processes, as on a shared CI machine
    python benchmarks/bench_bt_threads.py --items 8,32,128 --fits 40

Each row times ``fit_bradley_terry`` over a seeded round robin of soft outcomes, alternating the two
arms fit by fit so both see the same load: ``one thread`` is the library as shipped (L-BFGS-B under
``threadpoolctl``'s limit of one BLAS thread), ``BLAS default`` the same fit with the limit removed.
The ratio is one thread's median time over the default's: below 1 is faster.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from veriscale.selection.core import bradley_terry  # noqa: E402


def _busy() -> None:
    while True:
        pass


def outcomes(n: int, seed: int = 0) -> list[tuple[int, int, float]]:
    rng = random.Random(seed)
    return [(i, j, rng.random()) for i in range(n) for j in range(i + 1, n)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", default="8,32", help="comma-separated candidate counts")
    ap.add_argument("--fits", type=int, default=30, help="fits per arm and row")
    ap.add_argument("--load", type=int, default=0, help="busy processes started beside the fits")
    args = ap.parse_args()
    hogs = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(args.load)]
    for h in hogs:
        h.start()
    shipped = bradley_terry._one_blas_thread
    arms = {"one thread": shipped, "BLAS default": contextlib.nullcontext}
    try:
        print(f"cpus {os.cpu_count()}, busy processes {args.load}, load average {os.getloadavg()[0]:.1f}")
        print(f"{'items':>6}{'one thread ms':>15}{'BLAS default ms':>17}{'ratio':>8}")
        for n in (int(x) for x in args.items.split(",")):
            data = outcomes(n)
            bradley_terry.fit_bradley_terry(n, data)  # imports and the controller, outside the timing
            times: dict[str, list[float]] = {name: [] for name in arms}
            for _ in range(args.fits):
                for name, limit in arms.items():
                    bradley_terry._one_blas_thread = limit
                    start = time.perf_counter()
                    bradley_terry.fit_bradley_terry(n, data)
                    times[name].append(time.perf_counter() - start)
            one, default = (1000 * statistics.median(times[k]) for k in arms)
            print(f"{n:>6}{one:>15.2f}{default:>17.2f}{one / default:>8.2f}")
    finally:
        bradley_terry._one_blas_thread = shipped
        for h in hogs:
            h.terminate()


if __name__ == "__main__":
    main()
