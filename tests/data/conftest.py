"""Shared fixtures for the data tests: the real dev data, loaded once per session."""

from __future__ import annotations

import pytest

from veriscale.data.importers import load_file
from veriscale.data.model import Candidate

from tests.data.dev_data_paths import SWEBENCH_TRAJS, TERMINAL_BENCH


@pytest.fixture(scope="session")
def terminal_bench() -> list[Candidate]:
    name, candidates = load_file(TERMINAL_BENCH)
    assert name == "atif"
    return candidates


@pytest.fixture(scope="session")
def swebench_trajs() -> list[Candidate]:
    name, candidates = load_file(SWEBENCH_TRAJS)
    assert name == "mini-swe-agent"
    return candidates
