"""What selection asks of a verifier: the typed seam between the tournaments and the judge.

``veriscale.verify.reward.Verifier`` is the one implementation; a test double states the same
members (``tests/selection/test_select.py``)::

    def pick(verifier: SelectionVerifier) -> None: ...       # plan_selection, aselect, VerifierJudge
    def price(verifier: BudgetVerifier) -> None: ...         # the cost controller's judge also plans and prices

Selection reads these members and nothing else (no ``getattr`` probes): the verdicts come from
``acompare``/``ascore`` awaited on the caller's loop, the prompt fit from ``model``, ``criteria``
and ``scale``, the repeats from ``repeats`` and ``reasoning``, the cost from ``usage``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from veriscale.engine.planned import PlannedCall
    from veriscale.engine.sync_facade import CallExecutor
    from veriscale.engine.usage import Usage
    from veriscale.verify.criteria import CriteriaSet
    from veriscale.verify.prompts import Images
    from veriscale.verify.results import CompareResult, ScoreResult
    from veriscale.verify.scale import Scale

Progress = Callable[[Any], None]


class SelectionVerifier(Protocol):
    """The verifier a selection judges with (plan, tournaments, reason)."""

    model: Any  #: the backend (``count_tokens``, ``context_size``; an ``EndpointPool`` stands for several)
    criteria: CriteriaSet
    scale: Scale
    reasoning: bool  #: sampled reasoning before the grade: repeats differ, so more of them pay
    repeats: int | None  #: K asked for (None: the verifier's default)
    injection_detect: bool  #: run the prompt-injection detector over what the judge reads

    @property
    def usage(self) -> Usage: ...

    def image_tokens(self) -> tuple[int, bool]:
        """Prompt tokens one image costs, and whether it was measured (asked only of a pool with images)."""

    async def acompare(self, task: str, a: str, b: str, *, only_repeat: int | None = None,
                       progress: Progress | None = None, images: Images | None = None) -> CompareResult: ...

    async def ascore(self, task: str, candidate: str, *, progress: Progress | None = None,
                     images: Images | None = None) -> ScoreResult: ...


class BudgetVerifier(SelectionVerifier, Protocol):
    """A selection verifier the cost controller can also price (its plan, its store) and rescale."""

    executor: CallExecutor

    def plan_compare(self, task: str, a: str, b: str, only_repeat: int | None = None
                     ) -> tuple[list[PlannedCall], list[str]]: ...

    def with_scale(self, scale: Scale) -> BudgetVerifier: ...
