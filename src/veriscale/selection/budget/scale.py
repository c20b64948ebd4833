"""The cost controller's G: the finest scale the backend can read in one call and the budget pays for.

    cap = readable_labels(verifier)                        # 5 (a server asked for top_logprobs=5), None: all
    plan = plan_granularity(parse_scale("letters:20"), parse_budget("calls=60"), cap, price)
    plan.scale.name, plan.why          # 'letters:5', 'the verifier reads the top 5 tokens of a slot ...'
    plan.step(budget)                  # the BudgetStep the run records before the ring

``price(scale)`` is what the decision's first comparison costs on ``scale`` in the budget's unit.

**The rule.** G starts at the user's scale and is never raised above it. It is lowered only where
the asked G cannot work as asked:

1. **The backend's read cap.** A server shows the ``top_logprobs`` most probable tokens of a slot
   (``?top_logprobs=N`` on the model URI, 20 by default). A label outside them reads as probability
   0, so with G above that cap the reward is an expectation over a truncated distribution. G is
   lowered to the cap: the coarser scale every label of which one call can show. The embedded
   model reads every label's probability from its logits and has no cap.
2. **A tokens budget that cannot pay for one comparison at G** while a coarser scale's prompts
   fit: G is lowered to the finest that fits. Only a scale whose prompt spells its labels out
   (``labels:...``) costs more tokens with more labels; letters and digits name only the first and
   last label, so their prompts cost the same at every G (the coarsest would not fit either).

G is never lowered to save calls: with logprobs one call reads the whole distribution over
every label, so a coarser scale makes the same calls and keeps less of what each one reads.
A coarser scale keeps the family: ``letters:G`` and ``digits:G`` take their first G labels, a
``labels:`` scale its best and worst label and evenly spaced ones between; ``yesno`` has none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from veriscale.engine.routing import EndpointPool
from veriscale.models.abilities import ReadPlanned, StagedScorer, TopK
from veriscale.selection.budget.steps import BudgetStep
from veriscale.selection.budget.form import Budget
from veriscale.verify.scale import Scale, custom, digits, letters

if TYPE_CHECKING:
    from veriscale.selection.verifier_seam import SelectionVerifier


def coarser(scale: Scale, g: int) -> Scale | None:
    """``scale`` with ``g`` labels (``g`` below its own G), or None when it has no coarser form."""
    if g >= scale.granularity:
        return scale
    if g < 2 or scale.name == "yesno":
        return None
    family = scale.name.partition(":")[0]
    if family == "letters":
        return letters(g)
    if family == "digits":
        return digits(g)
    top = scale.granularity - 1
    return custom([scale.labels[round(i * top / (g - 1))] for i in range(g)])


def readable_labels(verifier: SelectionVerifier) -> int | None:
    """The most labels one call can show of a slot: the smallest ``top_logprobs`` over the verifier's
    endpoints (a two-stage model's scorer's), None where every label's probability is read (embedded,
    an exact read plan, a sampled one)."""
    model = verifier.model
    backends = [e.backend for e in model.endpoints] if isinstance(model, EndpointPool) else [model]
    caps = [cap for cap in (_cap(b) for b in backends) if cap is not None]
    return min(caps) if caps else None


def _cap(backend: Any) -> int | None:
    if isinstance(backend, StagedScorer):
        return _cap(backend.scorer)
    if backend.is_embedded:
        return None
    plan = backend.read_plan() if isinstance(backend, ReadPlanned) else None
    if plan is not None and plan.kind.value in ("exact", "sampled"):
        return None  # every label's probability is read (or drawn): no top-k cut
    return int(backend.top_logprobs) if isinstance(backend, TopK) else None


@dataclass(frozen=True)
class GranularityPlan:
    """The G the decision runs on: ``scale`` (``asked`` or coarser), ``why``, the backend's read ``cap``,
    and ``smallest``: the least budget that pays for one comparison on the coarsest scale allowed."""

    asked: Scale
    scale: Scale
    why: str
    cap: int | None
    smallest: int

    @property
    def lowered(self) -> bool:
        return self.scale.granularity < self.asked.granularity

    def step(self, budget: Budget) -> BudgetStep:
        return BudgetStep("granularity", f"G = {self.scale.granularity} ({self.scale.name})", self.why, 0, 0,
                          budget.amount, None)

    def to_dict(self) -> dict[str, Any]:
        return {"asked": self.asked.name, "scale": self.scale.name, "g": self.scale.granularity,
                "asked_g": self.asked.granularity, "lowered": self.lowered, "read_cap": self.cap, "why": self.why}


def _coarser(scale: Scale, g: int) -> Scale:
    """:func:`coarser` for a ``g`` from 2 to below ``scale``'s granularity, where there always is one."""
    found = coarser(scale, g)
    assert found is not None, (scale.name, g)
    return found


def plan_granularity(asked: Scale, budget: Budget, cap: int | None, price: Callable[[Scale], int]) -> GranularityPlan:
    """The G the rule above gives (see the module docstring)."""
    scale, reasons = asked, []
    if cap is not None and asked.granularity > cap:
        capped = coarser(asked, cap)
        if capped is not None:
            scale = capped
            reasons.append(f"the verifier shows the top {cap} tokens of a slot (top_logprobs), so one call cannot "
                           f"read all {asked.granularity} labels: G is lowered to {cap} ({capped.name})")
    coarsest = coarser(scale, 2) or scale
    smallest = min(price(scale), price(coarsest)) if coarsest is not scale else price(scale)
    if budget.kind == "tokens" and price(scale) > budget.amount and smallest <= budget.amount:
        low, high = 2, scale.granularity - 1  # the finest coarser scale whose first comparison fits
        while low < high:
            mid = (low + high + 1) // 2
            if price(_coarser(scale, mid)) <= budget.amount:
                low = mid
            else:
                high = mid - 1
        fitted = _coarser(scale, low)
        reasons.append(f"{budget} cannot pay for one comparison on {scale.name} ({price(scale)} tokens) but can on "
                       f"{fitted.name} ({price(fitted)}), the finest that fits: its prompts spell fewer labels out")
        scale = fitted
    if not reasons:
        reasons.append(f"G = {asked.granularity} as asked: " + (
            "the verifier reads every label's probability" if cap is None else
            f"the verifier's top {cap} tokens can show every label") +
            "; a coarser G would make the same calls (one call reads every label) and keep less of each")
    return GranularityPlan(asked, scale, "; ".join(reasons), cap, smallest)
