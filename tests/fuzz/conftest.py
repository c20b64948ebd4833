"""The fuzz suites' report: inputs tried per suite, and the tracebacks and hangs among them.

At the end of a run the counts are printed; with ``VERISCALE_FUZZ_REPORT=path.json`` they are
also written there (docs/RELIABILITY.md quotes them)::

    VERISCALE_FUZZ_REPORT=fuzz.json python -m pytest -q tests/fuzz
"""

from __future__ import annotations

import os

from tests.fuzz import guard


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    data = guard.report()
    if not data:
        return
    terminalreporter.section("fuzz inputs")
    total = {"inputs": 0, "traceback": 0, "hang": 0}
    for suite, row in data.items():
        for key in total:
            total[key] += int(row.get(key, 0))
        terminalreporter.write_line(
            f"{suite}: {row['inputs']} inputs, {row.get('accepted', 0)} accepted, {row.get('rejected', 0)} rejected "
            f"in one sentence, {row.get('traceback', 0)} tracebacks, {row.get('hang', 0)} hangs"
            + (f"; causes: {'; '.join(row['causes'])}" if row["causes"] else ""))
    terminalreporter.write_line(f"total: {total['inputs']} inputs, {total['traceback']} tracebacks, {total['hang']} hangs")
    path = os.environ.get("VERISCALE_FUZZ_REPORT")
    if path:
        guard.write_report(path)
