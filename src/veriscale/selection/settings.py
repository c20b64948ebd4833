"""The settings of one selection, shared by ``select``, ``bench`` and the CLI.

    settings = SelectionSettings(method="ppt", k=2, criteria="agent", seed=3)
    verifier = settings.verifier(load_backend("embedded"), store=Store.open())
    sel = select(None, candidates, verifier=verifier, settings=settings)
    replace(settings, k=1, discrete=True)          # one point of a bench sweep

Tournament fields: ``method`` (ppt, round_robin, knockout, pointwise), ``k`` PPT pivots,
``repeats`` judgements per comparison (None: 1 for PPT, 2 otherwise), ``adaptive`` (stop
once the leader's confidence reaches ``min_confidence``), ``budget_tokens`` per rendered
candidate (None: fits the context, capped for speed), ``seed`` (ring, bracket, sampling).
``budget`` (``"calls=60"``, ``"tokens=40000"`` or a ``Budget``): what one decision may spend; the
cost controller (``veriscale.selection.budget.controller``) then plans PPT's pivots, repeats and criteria
inside it (cache hits are free). None: the fixed schedule above.
Injection fields: ``injection_detect`` and ``injection_mitigation`` configure the verifier,
``injection_policy`` what the pick does with suspects (``veriscale.selection.core.suspects``).
Judge fields (``scale``, ``criteria``, ``reasoning``, ``discrete``) configure the Verifier that
``verifier()`` builds; a selection reads them from the verifier it is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from veriscale.engine.store import Store
from veriscale.errors import UserError, setting
from veriscale.models.base import ModelBackend
from veriscale.selection.budget.form import Budget, parse_budget
from veriscale.verify.criteria import CriteriaSet, load_criteria
from veriscale.verify.injection import check_policy
from veriscale.verify.reward import Verifier

if TYPE_CHECKING:
    from veriscale.settings import Settings

METHODS = ("ppt", "round_robin", "knockout", "pointwise")
DEFAULT_REPEATS = {"ppt": 1, "round_robin": 2, "knockout": 2, "pointwise": 1}


@dataclass(frozen=True)
class SelectionSettings:
    """What to run and how to judge; invalid values raise a UserError naming the fix."""

    method: str = "ppt"
    k: int = 2
    repeats: int | None = None
    adaptive: bool = True
    min_confidence: float = 0.9
    budget_tokens: int | None = None
    seed: int = 0
    scale: str = "letters"
    criteria: CriteriaSet | str = "general"
    reasoning: bool = False
    discrete: bool = False
    injection_detect: bool | None = None  # None: veriscale.verify.injection.DETECT_BY_DEFAULT
    injection_mitigation: str | None = None  # None: veriscale.verify.resist.DEFAULT_MITIGATION
    injection_policy: str = "none"  # none, lose_ties, exclude (veriscale.selection.core.suspects)
    budget: Budget | str | None = None  # per decision: "calls=60" or "tokens=40000" (the cost controller)

    def __post_init__(self) -> None:
        check_policy(self.injection_policy)
        if self.budget is not None:
            object.__setattr__(self, "budget", parse_budget(self.budget))
            if self.method != "ppt":
                raise UserError(f"{setting('budget', str(self.budget))} plans its own PPT steps, so it does not run "
                                f"with {setting('method', self.method)}: drop one of them")
        if self.method not in METHODS:
            raise UserError(f"selection method '{self.method}' is unknown: use one of {', '.join(METHODS)}")
        if self.method == "ppt" and (not isinstance(self.k, int) or isinstance(self.k, bool) or self.k < 1):
            raise UserError(f"k={self.k!r} pivots is not allowed: pass k >= 1 (e.g. 2)")
        if self.repeats is not None and (not isinstance(self.repeats, int) or self.repeats < 1):
            raise UserError(f"repeats={self.repeats!r} must be a whole number >= 1")
        if not 0.0 < self.min_confidence <= 1.0:
            raise UserError(f"min_confidence={self.min_confidence!r} must be in (0, 1]: e.g. 0.9")

    @classmethod
    def from_flags(cls, resolved: "Settings", *, criteria: CriteriaSet | str, budget: str | None = None,
                   **flags: Any) -> "SelectionSettings":
        """What a command's flags ask for, one way for every command (``select``, ``select-many``):
        a flag left out (None) takes the field's default; ``budget`` and the injection settings are
        the resolved ones (flag > environment > file > default).

            SelectionSettings.from_flags(settings.current(), criteria=crits, method="ppt", k=None)
        """
        given = {name: value for name, value in flags.items() if value is not None}
        return cls(criteria=criteria, budget=resolved.with_flags(budget=budget).budget,
                   injection_policy=resolved.injection_policy, **resolved.injection(), **given)

    @property
    def repeats_wanted(self) -> int:
        """Judgements per comparison asked for: ``repeats``, else the method's default."""
        return DEFAULT_REPEATS[self.method] if self.repeats is None else self.repeats

    @property
    def adaptive_applies(self) -> bool:
        """Adaptive stopping is asked for and the method supports it (PPT, round robin)."""
        return self.adaptive and self.method in ("ppt", "round_robin")

    def criteria_set(self) -> CriteriaSet:
        """``criteria`` loaded (a built-in name or a Markdown file) when given by name."""
        return load_criteria(self.criteria) if isinstance(self.criteria, str) else self.criteria

    def verifier(self, model: ModelBackend, *, store: Store | None = None, refresh: bool = False,
                 max_calls: int | None = None, concurrency: int = 4) -> Verifier:
        """The Verifier these judge fields describe (``repeats`` None: its own defaults)."""
        return Verifier(model, store=store, scale=self.scale, criteria=self.criteria_set(), repeats=self.repeats,
                        reasoning=self.reasoning, discrete=self.discrete, seed=self.seed, refresh=refresh,
                        max_calls=max_calls, concurrency=concurrency, injection_detect=self.injection_detect,
                        injection_mitigation=self.injection_mitigation)
