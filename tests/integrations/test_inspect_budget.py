"""``veriscale_scorer(budget=...)`` takes the budget in the form ``veriscale_best`` and the ``budget``
setting take (``"calls=N"``), or the number N; a token budget (a pointwise score is limited in calls)
or anything else is refused when the scorer is built, in one sentence."""

from __future__ import annotations

import pytest

from veriscale.errors import UserError
from veriscale.integrations.inspect_scorer import max_calls, veriscale_scorer


@pytest.mark.parametrize("budget,calls", [("calls=12", 12), (" CALLS = 3 ", 3), (5, 5), (None, None)])
def test_the_scorer_takes_calls_as_the_reducer_does_or_a_number(budget, calls) -> None:
    assert max_calls(budget) == calls


@pytest.mark.parametrize("budget", ["tokens=4000", "calls=0", "60", "lots", 0, True, 2.5])
def test_any_other_budget_is_refused_when_the_scorer_is_built(budget) -> None:
    with pytest.raises(UserError) as err:
        veriscale_scorer(budget=budget)
    text = str(err.value)
    assert text.startswith(f"veriscale_scorer(budget={budget!r})") and 'budget="calls=N"' in text and "\n" not in text
