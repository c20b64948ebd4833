"""How often the secret redactor fires on real dev candidates (each firing is a false redaction
unless the text really holds a secret; the findings are printed so a person can tell which).

    python benchmarks/bench_redact_devdata.py                 # every dev candidate
    python benchmarks/bench_redact_devdata.py --limit 50      # the first 50 of each file
    VERISCALE_DEV_DATA=/path/to/shared/data python benchmarks/bench_redact_devdata.py

A candidate is one pairwise output, one ProcessBench solution, or one whole agent trajectory
(SWE-bench, Terminal-Bench), all its strings included. The CI test
(tests/test_redact.py::test_dev_candidates_are_not_redacted) runs the same count on a sample.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _common import dev_data  # noqa: E402
from veriscale.redact import Redactor



def _lines(path: Path) -> Iterator[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def dev_candidates(data: Path | None = None, limit: int | None = None) -> Iterator[tuple[str, Any]]:
    """(name, candidate) for each dev candidate: a string, or a trajectory as JSON-ready data."""
    sources = [
        ("pairwise_dev.jsonl", lambda r: [(f"{r['id']}/output_1", r["output_1"]), (f"{r['id']}/output_2", r["output_2"])]),
        ("progress_processbench_dev.jsonl", lambda r: [(r["id"], r["steps"])]),
        ("swebench_verified_trajectories_dev.jsonl.gz", lambda r: [(r["instance_id"], r["steps"])]),
        ("terminal_bench_2.1_trials.jsonl.gz", lambda r: [(r["trial_name"], r["trajectory"])]),
    ]
    data = data if data is not None else dev_data()
    for name, pick in sources:
        for k, row in enumerate(_lines(data / name)):
            if limit is not None and k >= limit:
                break
            yield from pick(row)


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def count(candidates: Iterator[tuple[str, Any]], redactor: Redactor = Redactor()) -> dict[str, Any]:
    """How many candidates (and characters) were read, which were redacted, and what was found."""
    n = chars = 0
    hits: list[tuple[str, str, str]] = []
    for name, candidate in candidates:
        n += 1
        for text in strings(candidate):
            chars += len(text)
            hits += [(name, kind, secret) for kind, secret in redactor.findings(text)]
    return {"candidates": n, "chars": chars, "redacted_candidates": len({h[0] for h in hits}),
            "findings": hits, "by_kind": Counter(h[1] for h in hits)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="candidates per file (default all)")
    args = parser.parse_args()
    start = time.perf_counter()
    report = count(dev_candidates(dev_data(), args.limit))
    took = time.perf_counter() - start
    print(f"{report['candidates']} candidates, {report['chars'] / 1e6:.1f} M characters, {took:.1f} s")
    print(f"redacted candidates: {report['redacted_candidates']}  findings by kind: {dict(report['by_kind'])}")
    for name, kind, secret in report["findings"]:
        print(f"  {name}: {kind}: {secret[:12]}… ({len(secret)} chars)")


if __name__ == "__main__":
    main()
