"""What a job asks of the gateway, and what it gets back: one planned call, one outcome.

    call = PlannedCall(request, tag=("Correctness", 0))     # tag: the caller's bookkeeping
    outcome.response, outcome.cache_hit, outcome.error      # after Gateway.run
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from veriscale.models.base import ScoreRequest, ScoreResponse


@dataclass
class PlannedCall:
    request: ScoreRequest
    tag: Any = None  # the caller's bookkeeping (criterion, repeat, slot...)
    key: str = ""


@dataclass
class CallOutcome:
    call: PlannedCall
    response: ScoreResponse | None
    cache_hit: bool
    error: str | None = None


Progress = Callable[[CallOutcome], None]
