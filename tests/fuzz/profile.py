"""How many inputs each fuzz test generates, and the hypothesis settings they share.

    @fuzz_settings(800)                  # 800 examples in CI; VERISCALE_FUZZ_SCALE=10 gives 8,000
    @given(...)
    def test_...(...): ...

The CI size keeps the whole package within about four minutes on two loaded cores while it
tries more than 10,000 inputs; the full-size run behind docs/RELIABILITY.md is the same suite
with ``VERISCALE_FUZZ_SCALE=10``. No ``deadline`` (a timing assertion): each input is bounded by
``guard.bounded`` instead.

Inputs are drawn, not fixed: every run takes a fresh seed (``SEED``, set by tests/fuzz/conftest.py,
printed in the report header and summary), so each run tries new inputs at the same size; a run is
replayed with ``VERISCALE_FUZZ_SEED=N`` or ``--hypothesis-seed=N``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

SCALE = float(os.environ.get("VERISCALE_FUZZ_SCALE", "1"))
#: this run's seed for every hypothesis test in tests/fuzz (conftest.py draws it or takes the one given)
SEED: int | str | None = None


def examples(n: int) -> int:
    """``n`` scaled by ``VERISCALE_FUZZ_SCALE`` (at least one)."""
    return max(1, round(n * SCALE))


def fuzz_settings(n: int, *, shrink: bool = True) -> settings:
    """Settings for a fuzz test of ``n`` examples (scaled); ``shrink=False`` where one input is costly."""
    phases = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target] + ([Phase.shrink] if shrink else [])
    return settings(max_examples=examples(n), deadline=None, phases=phases, database=None, print_blob=True,
                    derandomize=False,  # new inputs each run, from the printed seed
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture,
                                           HealthCheck.large_base_example])
