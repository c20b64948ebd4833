"""Reward hacking by length: the reward–length correlation, and a length-controlled reward.

A judge that prefers longer answers teaches the policy to pad. Each adapter logs the Pearson
correlation of reward and log length (TRL ``log_metric("veriscale/reward_length_corr")``,
OpenRLHF ``extra_logs.veriscale_reward_length_corr``, veRL's per-sample key of the same name)::

    correlation([0.8, 0.6, 0.2], [300, 120, 40])        # 0.99: longer got more (None: undefined)
    monitor = LengthMonitor(window=512)                  # the last 512 verified responses
    monitor.add([0.8, 0.2], [300, 40]); monitor.correlation()

``length_control = "residual"`` (the ``reward_length_control`` setting) takes the length out of
ranked groups' rewards: each verified member's reward minus ``b · (x − x̄)``, where ``x`` is its
log length, ``x̄`` its group's mean and ``b`` the slope of reward on log length within groups,
pooled over the last ``window`` ranked responses (this batch's included; at least
``MIN_POINTS`` of them, else nothing is changed). A group's mean reward is kept (clipped to
[0, 1]); a group of one (a pointwise value) is left as it is::

    LengthControl().adjust(rewards, lengths, groups)     # the rewards, length-controlled
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Sequence

from veriscale.errors import UserError, setting

LENGTH_CONTROLS = ("off", "residual")
DEFAULT_WINDOW = 512
MIN_POINTS = 8  # fewer pooled within-group points: the slope is not estimated, nothing is changed


def check_length_control(value: str) -> str:
    """``value`` if it is a length control, else a UserError naming the choices."""
    if value not in LENGTH_CONTROLS:
        raise UserError(f"{setting('reward_length_control', value)} is unknown: use one of {', '.join(LENGTH_CONTROLS)}")
    return value


def log_length(n: int) -> float:
    return math.log1p(max(int(n), 0))


def correlation(rewards: Sequence[float | None], lengths: Sequence[int]) -> float | None:
    """Pearson r of reward and log length over the verified responses; None with fewer than two
    or when either does not vary."""
    pairs = [(log_length(n), float(r)) for r, n in zip(rewards, lengths) if r is not None]
    return _pearson(pairs)


def _pearson(pairs: Sequence[tuple[float, float]]) -> float | None:
    if len(pairs) < 2:
        return None
    mx = sum(x for x, _ in pairs) / len(pairs)
    my = sum(y for _, y in pairs) / len(pairs)
    sxy = sum((x - mx) * (y - my) for x, y in pairs)
    sxx = sum((x - mx) ** 2 for x, _ in pairs)
    syy = sum((y - my) ** 2 for _, y in pairs)
    if sxx <= 1e-12 or syy <= 1e-12:
        return None
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


class LengthMonitor:
    """The reward–length correlation over the last ``window`` verified responses (thread-safe)."""

    def __init__(self, window: int = DEFAULT_WINDOW) -> None:
        self._points: deque[tuple[float, float]] = deque(maxlen=window)
        self._lock = threading.Lock()

    def add(self, rewards: Sequence[float | None], lengths: Sequence[int]) -> None:
        with self._lock:
            self._points.extend((log_length(n), float(r)) for r, n in zip(rewards, lengths) if r is not None)

    def correlation(self) -> float | None:
        with self._lock:
            return _pearson(list(self._points))


class LengthControl:
    """Ranked rewards with the within-group length slope taken out (see the module docstring)."""

    def __init__(self, window: int = DEFAULT_WINDOW) -> None:
        self._points: deque[tuple[float, float]] = deque(maxlen=window)  # (x − x̄_group, r − r̄_group)
        self._lock = threading.Lock()
        self.slope: float | None = None  # the last slope used

    def adjust(self, rewards: Sequence[float | None], lengths: Sequence[int], groups: Sequence[int]) -> list[float | None]:
        """``rewards`` (None kept None) length-controlled; ``groups[i]``: response i's group id."""
        members: dict[int, list[int]] = {}
        for i, (r, g) in enumerate(zip(rewards, groups)):
            if r is not None:
                members.setdefault(g, []).append(i)
        ranked = [idx for idx in members.values() if len(idx) > 1]
        centred: dict[int, float] = {}
        new_points = []
        for idx in ranked:
            mx = sum(log_length(lengths[i]) for i in idx) / len(idx)
            my = sum(float(rewards[i]) for i in idx) / len(idx)
            for i in idx:
                centred[i] = log_length(lengths[i]) - mx
                new_points.append((centred[i], float(rewards[i]) - my))
        with self._lock:
            self._points.extend(new_points)
            points = list(self._points)
        sxx = sum(x * x for x, _ in points)
        if len(points) < MIN_POINTS or sxx <= 1e-12:
            self.slope = None
            return list(rewards)
        self.slope = sum(x * y for x, y in points) / sxx
        out = list(rewards)
        for i, x in centred.items():
            out[i] = min(1.0, max(0.0, float(rewards[i]) - self.slope * x))
        return out
