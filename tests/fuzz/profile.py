"""How many inputs each fuzz test generates, and the hypothesis settings they share.

    @fuzz_settings(800)                  # 800 examples in CI; VERISCALE_FUZZ_SCALE=10 gives 8,000
    @given(...)
    def test_...(...): ...

The CI size keeps the whole package within about four minutes on two loaded cores while it
tries more than 10,000 inputs; the full-size run behind docs/RELIABILITY.md is the same suite
with ``VERISCALE_FUZZ_SCALE=10``. No ``deadline`` (a timing assertion): each input is bounded by
``guard.bounded`` instead.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

SCALE = float(os.environ.get("VERISCALE_FUZZ_SCALE", "1"))


def examples(n: int) -> int:
    """``n`` scaled by ``VERISCALE_FUZZ_SCALE`` (at least one)."""
    return max(1, round(n * SCALE))


def fuzz_settings(n: int, *, shrink: bool = True) -> settings:
    """Settings for a fuzz test of ``n`` examples (scaled); ``shrink=False`` where one input is costly."""
    phases = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target] + ([Phase.shrink] if shrink else [])
    return settings(max_examples=examples(n), deadline=None, phases=phases, database=None, print_blob=True,
                    derandomize=not os.environ.get("VERISCALE_FUZZ_RANDOM"),  # CI: the same inputs every run
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture,
                                           HealthCheck.large_base_example])
