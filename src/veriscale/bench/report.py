"""What a bench measured: one row per configuration, the cost estimate, the whole report.

    report = BenchReport("pairs", "pairs.jsonl", model.uri, "general", 10, 0, ids, estimate, rows)
    report.to_dict()          # the --json shape
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from veriscale.bench.configs import BenchConfig
from veriscale.engine.executor import Usage


@dataclass
class BenchRow:
    config: BenchConfig
    label: str
    metrics: dict[str, Any]
    usage: Usage
    wall_s: float

    def to_dict(self) -> dict[str, Any]:
        return {"config": asdict(self.config), "label": self.label, "metrics": self.metrics,
                "usage": self.usage.to_dict(), "wall_s": round(self.wall_s, 3)}


@dataclass(frozen=True)
class BenchEstimate:
    """Model calls and prompt tokens before starting; ``upper_bound`` when not exact."""

    model_calls: int
    cached_calls: int
    prompt_tokens: int
    upper_bound: bool
    tokens_exact: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class BenchReport:
    """Everything one ``veriscale bench`` run measured (``to_dict`` is the ``--json`` shape)."""

    kind: str
    data: str
    model: str
    criteria: str
    limit: int | None
    seed: int
    items: list[str]
    estimate: BenchEstimate
    rows: list[BenchRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "data": self.data, "model": self.model, "criteria": self.criteria,
                "limit": self.limit, "seed": self.seed, "n_items": len(self.items), "items": self.items,
                "estimate": self.estimate.to_dict(), "rows": [r.to_dict() for r in self.rows], "notes": self.notes}
