"""What progress tracking returns: one point per checkpoint, and the curve they make.

    curve.values()          # [0.12, 0.2, ..., 0.93]  (None where a checkpoint's calls failed)
    curve.voc               # Value-Order Correlation, or None (see curve.notes)
    curve.sparkline()       # '▁▂▂▃▅▇█'
    curve.to_dict()         # the --json shape
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from veriscale.progress.events import ProgressEvent
from veriscale.progress.voc import value_order_correlation, voc_note

SPARKS = "▁▂▃▄▅▆▇█"


@dataclass
class ProgressPoint:
    """The score of the prefix that ends at step ``step`` (1-based).

    ``value`` is the expected progress in [0, 1] (mean over repeats), None when a call failed
    (``error`` says why). ``label_probs`` and ``label_mass`` are averaged over repeats; the
    token figures add up what this checkpoint's calls cost; ``rerendered`` marks a checkpoint
    whose prompt was re-rendered after an overflow (processed in full once).
    """

    step: int
    value: float | None
    label_probs: dict[str, float] = field(default_factory=dict)
    label_mass: float = 0.0
    repeats: int = 0
    prompt_tokens: int = 0  # processed by the model (after prefix reuse)
    prompt_tokens_total: int = 0  # length of the prompts
    completion_tokens: int = 0
    cache_hits: int = 0
    latency_s: float = 0.0
    rerendered: bool = False
    error: str | None = None
    #: the images the judgement saw, in order (``ImagePart.shown()`` records with the ``step`` each
    #: belongs to, "task" for the task's): a dashboard's filmstrip; empty for a text trajectory
    frames: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The --json shape of a point (``frames`` only when it saw images: a text curve keeps its shape)."""
        d = dict(self.__dict__)
        if not self.frames:
            del d["frames"]
        else:
            d["frames"] = [dict(f) for f in self.frames]
        return d


@dataclass
class ProgressCurve:
    """A trajectory's progress curve, with its VOC, events and cost."""

    task: str
    model: str
    scale: str
    points: list[ProgressPoint] = field(default_factory=list)
    events: list[ProgressEvent] = field(default_factory=list)
    n_steps: int = 0  # steps seen so far (a live curve grows)
    rerenders: int = 0
    notes: list[str] = field(default_factory=list)
    trajectory_id: str = ""
    outcome: Any = None  # the trajectory's own label (e.g. reward), for reports; never in a prompt

    def values(self) -> list[float | None]:
        return [p.value for p in self.points]

    def steps(self) -> list[int]:
        return [p.step for p in self.points]

    @property
    def voc(self) -> float | None:
        return value_order_correlation(self.values(), self.steps())

    @property
    def voc_note(self) -> str:
        return voc_note(self.values())

    @property
    def failed(self) -> bool:
        return any(p.error for p in self.points)

    @property
    def prompt_tokens(self) -> int:
        return sum(p.prompt_tokens for p in self.points)

    @property
    def prompt_tokens_total(self) -> int:
        return sum(p.prompt_tokens_total for p in self.points)

    def sparkline(self) -> str:
        """One block character per point, its height the score ('·' for an unscored point)."""
        return "".join("·" if v is None else SPARKS[min(int(v * len(SPARKS)), len(SPARKS) - 1)]
                       for v in self.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "trajectory": self.trajectory_id, "task": self.task[:200], "model": self.model, "scale": self.scale,
            "n_steps": self.n_steps, "voc": self.voc, "voc_note": self.voc_note or None,
            "outcome": self.outcome, "events": [e.to_dict() for e in self.events],
            "cost": {"prompt_tokens": self.prompt_tokens, "prompt_tokens_total": self.prompt_tokens_total,
                     "completion_tokens": sum(p.completion_tokens for p in self.points),
                     "cache_hits": sum(p.cache_hits for p in self.points), "rerenders": self.rerenders},
            "notes": self.notes, "points": [p.to_dict() for p in self.points],
        }
