"""What model work cost, and what ``--dry-run`` says it would cost.

    usage = Usage(); usage.model_calls += 1
    spent = usage.since(snapshot)          # what happened after ``snapshot = usage.copy()``
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass
class Usage:
    """Counters of one job; ``prompt_tokens`` counts tokens the model actually processed."""

    model_calls: int = 0
    cache_hits: int = 0
    failed_calls: int = 0
    cancelled_calls: int = 0        # stopped before an answer came (a cancel, a sibling's error): asked again on a rerun
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0   # prompt tokens the server reports it served from its cache
    completion_tokens: int = 0
    latency_s: float = 0.0          # summed over model calls (not wall time)

    def add(self, other: "Usage") -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def to_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def copy(self) -> "Usage":
        return Usage(**self.to_dict())  # type: ignore[arg-type]

    def since(self, before: "Usage") -> "Usage":
        """What was spent between the snapshot ``before`` and now."""
        return Usage(**{k: v - getattr(before, k) for k, v in self.to_dict().items()})  # type: ignore[arg-type]


@dataclass
class Estimate:
    """What ``--dry-run`` reports: calls not yet in the store and their prompt tokens."""

    calls: int
    cached: int
    prompt_tokens: int
    token_count_exact: bool = True
