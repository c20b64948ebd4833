"""What one decision may spend, as a setting: ``calls=N`` or ``tokens=N``.

    parse_budget("calls=60")      # Budget(kind="calls", amount=60)
    str(parse_budget("tokens=4000"))   # 'tokens=4000'

Kept apart from the controller (:mod:`veriscale.selection.budget.controller`) so the settings can check a
budget without loading numpy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from veriscale.errors import UserError, setting

KINDS = ("calls", "tokens")
EXAMPLE = "calls=60"
_FORM = re.compile(r"^\s*(calls|tokens)\s*=\s*(\d+)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Budget:
    """What one decision may spend: ``amount`` model calls or prompt tokens (``kind``)."""

    kind: str
    amount: int

    def __str__(self) -> str:
        return f"{self.kind}={self.amount}"


def parse_budget(text: str | Budget, where: str | None = None) -> Budget:
    """``"calls=60"`` or ``"tokens=40000"`` as a Budget; anything else is one sentence naming
    ``where`` it came from (None: the ``budget`` setting) and a form that works."""
    if isinstance(text, Budget):
        return text
    match = _FORM.match(str(text))
    if not match or int(match.group(2)) < 1:
        named = f"{where} = {str(text)!r}" if where else setting('budget', str(text))
        raise UserError(f"{named} is not a budget: write calls=N or tokens=N with N >= 1, "
                        f"e.g. {EXAMPLE} or tokens=40000")
    return Budget(match.group(1).lower(), int(match.group(2)))
