"""Events on a progress curve as it grows: stall, regression, likely done.

    watch = EventWatch(stall_window=5, regression_drop=0.15)
    for step, value in enumerate([0.1, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3], start=1):
        for event in watch.push(step, value):
            print(event.kind, event.step, event.message)      # stall 7 ...

- **stall**: no gain of more than ``min_gain`` over the last ``stall_window`` checkpoints
  (the best of them is no better than the checkpoint before them). Fires once per stall.
- **regression**: the score fell more than ``regression_drop`` below the best so far. Fires
  once per fall; it can fire again after the score has climbed back.
- **likely_done**: the score reached ``done_threshold``. Fires once.

An event depends only on the points up to its step, so online and offline tracking agree.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from veriscale.errors import UserError, setting

DEFAULT_STALL_WINDOW = 5
DEFAULT_REGRESSION_DROP = 0.15
DEFAULT_DONE_THRESHOLD = 0.9
DEFAULT_MIN_GAIN = 0.02


@dataclass(frozen=True)
class ProgressEvent:
    """Something a caller may act on: ``kind`` is 'stall', 'regression' or 'likely_done'."""

    kind: str
    step: int
    value: float
    message: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class EventWatch:
    """Turns a growing sequence of (step, value) points into events."""

    stall_window: int = DEFAULT_STALL_WINDOW
    regression_drop: float = DEFAULT_REGRESSION_DROP
    done_threshold: float = DEFAULT_DONE_THRESHOLD
    min_gain: float = DEFAULT_MIN_GAIN
    points: list[tuple[int, float]] = field(default_factory=list)
    _stalled: bool = False
    _fallen: bool = False
    _done: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.stall_window, int) or self.stall_window < 1:
            raise UserError(f"stall window {self.stall_window!r} ({setting('stall_window')}) must be a whole number of checkpoints, 1 or more")
        if not 0 < self.regression_drop <= 1:
            raise UserError(f"regression drop {self.regression_drop!r} ({setting('regression_drop')}) must be above 0 and at most 1")
        if not 0 < self.done_threshold <= 1:
            raise UserError(f"done threshold {self.done_threshold!r} ({setting('done_threshold')}) must be above 0 and at most 1")

    def push(self, step: int, value: float | None) -> list[ProgressEvent]:
        """Add the point of checkpoint ``step`` (None: unscored, ignored) and return new events."""
        if value is None:
            return []
        self.points.append((step, value))
        return [e for e in (self._likely_done(step, value), self._regression(step, value), self._stall(step, value)) if e]

    def _likely_done(self, step: int, value: float) -> ProgressEvent | None:
        if self._done or value < self.done_threshold:
            return None
        self._done = True
        return ProgressEvent("likely_done", step, value, f"step {step}: progress {value:.0%}, the task looks done")

    def _regression(self, step: int, value: float) -> ProgressEvent | None:
        best_step, best = max(self.points[:-1], key=lambda p: (p[1], -p[0]), default=(step, value))
        if value >= best - self.regression_drop:
            if value >= best - self.regression_drop / 2:
                self._fallen = False
            return None
        if self._fallen:
            return None
        self._fallen = True
        return ProgressEvent("regression", step, value,
                             f"step {step}: progress fell to {value:.0%} from {best:.0%} at step {best_step}")

    def _stall(self, step: int, value: float) -> ProgressEvent | None:
        if len(self.points) <= self.stall_window:
            return None
        before = self.points[-self.stall_window - 1][1]
        window = [v for _, v in self.points[-self.stall_window:]]
        if max(window) > before + self.min_gain:
            self._stalled = False
            return None
        if self._stalled:
            return None
        self._stalled = True
        return ProgressEvent("stall", step, value,
                             f"step {step}: no progress over the last {self.stall_window} checkpoints (at {value:.0%})")
