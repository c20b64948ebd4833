"""The fuzz suites' seed and report.

Every run draws a fresh seed, prints it (the report header, and the summary at the end, which
``-q`` keeps) and uses it for every hypothesis test in this folder; a run is replayed with the
seed it printed::

    python -m pytest tests/fuzz                                  # fuzz seed: 1234567 (replay: ...)
    VERISCALE_FUZZ_SEED=1234567 python -m pytest tests/fuzz      # the same inputs again
    python -m pytest tests/fuzz --hypothesis-seed=1234567        # the same, with hypothesis' own option

At the end of a run the counts of inputs are printed; with ``VERISCALE_FUZZ_REPORT=path.json``
they are also written there (docs/RELIABILITY.md quotes them)::

    VERISCALE_FUZZ_REPORT=fuzz.json python -m pytest -q tests/fuzz
"""

from __future__ import annotations

import os
import secrets

import pytest

from tests.fuzz import guard, profile

SEED_ENV = "VERISCALE_FUZZ_SEED"


def _seed(config) -> int | str:
    """``--hypothesis-seed``, else ``$VERISCALE_FUZZ_SEED``, else a fresh one (32 bits: short to copy)."""
    given = config.getoption("--hypothesis-seed", None)
    if given is None or str(given).strip() == "":
        given = os.environ.get(SEED_ENV, "").strip() or None
    if given is None:
        return secrets.randbits(32)
    try:
        return int(given)
    except ValueError:
        return str(given)  # hypothesis takes any hashable seed; replayed by the same text


def pytest_configure(config):
    profile.SEED = _seed(config)
    # a worker process (pytest-xdist) or a nested pytest run draws the same seed
    os.environ[SEED_ENV] = str(profile.SEED)


def _replay_line() -> str:
    return f"fuzz seed: {profile.SEED} (replay: {SEED_ENV}={profile.SEED} python -m pytest tests/fuzz)"


def pytest_report_header(config):
    return [_replay_line()] if profile.SEED is not None else []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """Each hypothesis test here draws from the run's seed (hypothesis' ``--hypothesis-seed`` does the same for
    every test of the session; this applies it to this folder's tests only, whatever else the session runs)."""
    from hypothesis import core

    saved = core.global_force_seed
    if profile.SEED is not None:
        core.global_force_seed = profile.SEED
    try:
        yield
    finally:
        core.global_force_seed = saved


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    data = guard.report()
    if not data and profile.SEED is None:
        return
    terminalreporter.section("fuzz inputs")
    if profile.SEED is not None:
        terminalreporter.write_line(_replay_line())
    total = {"inputs": 0, "traceback": 0, "hang": 0}
    for suite, row in data.items():
        for key in total:
            total[key] += int(row.get(key, 0))
        terminalreporter.write_line(
            f"{suite}: {row['inputs']} inputs, {row.get('accepted', 0)} accepted, {row.get('rejected', 0)} rejected "
            f"in one sentence, {row.get('traceback', 0)} tracebacks, {row.get('hang', 0)} hangs"
            + (f"; causes: {'; '.join(row['causes'])}" if row["causes"] else ""))
    if data:
        terminalreporter.write_line(
            f"total: {total['inputs']} inputs, {total['traceback']} tracebacks, {total['hang']} hangs")
    path = os.environ.get("VERISCALE_FUZZ_REPORT")
    if path:
        guard.write_report(path)
