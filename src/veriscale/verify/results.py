"""Verdicts with provenance: every number traces back to the model calls that made it.

``ScoreResult.to_dict()`` / ``CompareResult.to_dict()`` give the ``--json`` shape::

    {"reward": 0.71, "criteria": {"Correctness": {"reward": 0.8, "label_probs": {...},
     "label_mass": 0.93, ...}}, "readings": [...], "usage": {"model_calls": 3, ...}}
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from veriscale.engine.sync_facade import Usage
from veriscale.models.sampled_read import pooled_se
from veriscale.verify.slot_order import order_verdicts

LOW_LABEL_MASS = 0.5  # below this the model mostly did not answer in the scale's format


@dataclass(frozen=True)
class ReadingTag:
    """What a planned call's slot reads: criterion, repeat, candidate, slot, slot order, seed."""

    criterion: str
    repeat: int
    candidate: str
    slot: str | None
    order: str | None
    seed: int | None


@dataclass
class Reading:
    """One score slot read once: one criterion, one repeat, one candidate."""

    criterion: str
    repeat: int
    candidate: str  # "a", "b", or "candidate" for pointwise
    slot: str | None  # "A"/"B" for pairwise, None for pointwise
    order: str | None  # "AB" (a shown first) or "BA"
    label_probs: dict[str, float]
    label_mass: float
    unseen_mass: float
    value: float | None  # expected (or argmax) label value in [0, 1]; None if unreadable
    prompt_tokens: int = 0
    prompt_tokens_total: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cache_hit: bool = False
    seed: int | None = None
    reasoning: str = ""
    error: str | None = None
    call_key: str = ""
    #: how the slot was read: exact, top-k, first-token or sampled (veriscale.models.read_strategy)
    strategy: str = ""
    prefilled: bool | None = None
    samples: int = 0  # a sampled read's draws (0: read from probabilities)
    value_se: float | None = None  # a sampled read's standard error of value


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def summarise_criterion(readings: list[Reading], labels: tuple[str, ...]) -> dict[str, Any]:
    """Mean reward, mean label distribution and masses over a criterion's valid readings."""
    ok = [r for r in readings if r.value is not None]
    out: dict[str, Any] = {
        "reward": mean([r.value for r in ok]) if ok else None,  # type: ignore[misc]
        "label_probs": {lab: mean([r.label_probs.get(lab, 0.0) for r in ok]) for lab in labels} if ok else {},
        "label_mass": mean([r.label_mass for r in readings]) if readings else 0.0,
        "unseen_mass": mean([r.unseen_mass for r in readings]) if readings else 0.0,
        "readings": len(ok),
        "failed_readings": len(readings) - len(ok),
    }
    out["low_label_mass"] = out["label_mass"] < LOW_LABEL_MASS
    return out


@dataclass
class VerdictBase:
    model: str
    scale: str
    criteria_set: str
    repeats_requested: int
    repeats_effective: int
    discrete: bool
    readings: list[Reading] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    #: ``injection_suspected`` (None: the detector was off) and ``injection`` (the span per candidate)
    injection: dict[str, Any] = field(default_factory=lambda: {"injection_suspected": None,
                                                               "injection": {"detector": "off"}})
    #: the images the verdict saw, by section ("task", "candidate" or "a"/"b"): label, source, size, digest
    images: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def injection_suspected(self) -> bool | None:
        """True when the detector found injection-shaped text in a candidate (None: not looked at)."""
        return self.injection.get("injection_suspected")

    @property
    def failed(self) -> bool:
        return bool(self.errors)

    def reward_se(self, candidate: str) -> float | None:
        """The standard error of a candidate's reward from sampled reads (None when read from probabilities)."""
        mine = [r for r in self.readings if r.candidate == candidate and r.value is not None]
        return pooled_se([r.value_se for r in mine]) if mine and all(r.samples for r in mine) else None

    @property
    def low_label_mass(self) -> bool:
        return any(r.label_mass < LOW_LABEL_MASS for r in self.readings if r.error is None)

    def _base_dict(self) -> dict[str, Any]:
        return {
            "model": self.model, "scale": self.scale, "criteria_set": self.criteria_set,
            "repeats_requested": self.repeats_requested, "repeats_effective": self.repeats_effective,
            "discrete": self.discrete, "failed": self.failed, "errors": self.errors,
            "low_label_mass": self.low_label_mass, "notes": self.notes,
            "usage": self.usage.to_dict(), "readings": [asdict(r) for r in self.readings],
            "read_strategies": sorted({r.strategy for r in self.readings if r.strategy}),
            **self.injection,
            **({"images": self.images} if self.images else {}),
        }


@dataclass
class ScoreResult(VerdictBase):
    """Pointwise verdict: ``reward`` in [0, 1], or None when a needed call failed."""

    reward: float | None = None
    criteria: dict[str, dict[str, Any]] = field(default_factory=dict)

    def criterion_rewards(self) -> dict[str, float | None]:
        """Reward per criterion (None where unscored): ``{"Output": 0.8, ...}``."""
        return {name: entry.get("reward") for name, entry in self.criteria.items()}

    def to_dict(self) -> dict[str, Any]:
        return {"reward": self.reward, "reward_se": self.reward_se("candidate"), "criteria": self.criteria,
                **self._base_dict()}


@dataclass
class CompareResult(VerdictBase):
    """Pairwise verdict: both rewards and P(a beats b) = sigmoid((reward_a - reward_b) / tau)."""

    reward_a: float | None = None
    reward_b: float | None = None
    p_a_wins: float | None = None
    tau: float = 0.0
    criteria: dict[str, dict[str, Any]] = field(default_factory=dict)

    def criterion_rewards(self) -> dict[str, tuple[float | None, float | None]]:
        """``(reward of a, reward of b)`` per criterion (None where unscored): ``{"Output": (0.8, 0.6)}``."""
        return {name: (entry.get("reward_a"), entry.get("reward_b")) for name, entry in self.criteria.items()}

    @property
    def slot_orders(self) -> dict[str, Any]:
        """P(a ≻ b) in each slot order alone and whether they flip (``veriscale.verify.slot_order``)."""
        return order_verdicts(self.readings, self.tau) if self.tau > 0 else \
            {"a_first": None, "b_first": None, "gap": None, "position_bias": False}

    @property
    def position_bias(self) -> bool:
        """True when the two slot orders name different winners, far apart: the mean is no close call."""
        return bool(self.slot_orders["position_bias"])

    def to_dict(self) -> dict[str, Any]:
        return {"reward_a": self.reward_a, "reward_b": self.reward_b, "p_a_wins": self.p_a_wins,
                "reward_a_se": self.reward_se("a"), "reward_b_se": self.reward_se("b"),
                "tau": self.tau, "criteria": self.criteria, "slot_orders": self.slot_orders,
                "position_bias": self.position_bias, **self._base_dict()}
