"""What a bench measured: one row per configuration, the cost estimate, the whole report.

    report = BenchReport("pairs", "pairs.jsonl", model.uri, "general", 10, 0, ids, estimate, rows)
    report.to_dict()          # the --json shape
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from veriscale.bench.configs import BenchConfig
from veriscale.engine.sync_facade import Usage
from veriscale.engine.prices import PriceTable, usage_money


@dataclass
class BenchRow:
    config: BenchConfig
    label: str
    metrics: dict[str, Any]
    usage: Usage
    wall_s: float

    def cost(self, model: str = "", prices: PriceTable | None = None) -> dict[str, Any]:
        """Calls, prompt tokens sent / processed / cached (None: some server did not say), completion
        tokens, wall time and, with a price table, money."""
        u = self.usage.to_dict()
        out = {"calls": u["model_calls"], "cache_hits": u["cache_hits"], "prompt_tokens_sent": u["prompt_tokens_sent"],
               "prompt_tokens_processed": u["prompt_tokens_processed"], "cached_prompt_tokens": u["cached_prompt_tokens"],
               "completion_tokens": u["completion_tokens"], "wall_s": round(self.wall_s, 3)}
        if prices is not None:
            out["money"] = usage_money(self.usage, model, prices)
        return out

    def to_dict(self, model: str = "", prices: PriceTable | None = None) -> dict[str, Any]:
        return {"config": asdict(self.config), "label": self.label, "metrics": self.metrics,
                "usage": self.usage.to_dict(), "cost": self.cost(model, prices), "wall_s": round(self.wall_s, 3)}


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
    prices: PriceTable | None = None  # money in each row's cost (veriscale.engine.prices); None: no money

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "data": self.data, "model": self.model, "criteria": self.criteria,
                "limit": self.limit, "seed": self.seed, "n_items": len(self.items), "items": self.items,
                "estimate": self.estimate.to_dict(), "rows": [r.to_dict(self.model, self.prices) for r in self.rows],
                "notes": self.notes}
