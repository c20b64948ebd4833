"""Value-Order Correlation: does the progress score rise with the step index?

    value_order_correlation([0.1, 0.2, 0.15, 0.6, 0.9])       # 0.9 (Spearman's rho)
    voc_by_outcome([(0.9, True), (0.5, False), (0.7, True)])  # {'success': {...}, 'failure': {...}}

VOC is Spearman's rank correlation between checkpoint order and score. It needs at least
``MIN_POINTS`` scored points and a curve that is not flat; otherwise it is None, with the reason
from :func:`voc_note`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


MIN_POINTS = 3


def voc_note(values: Sequence[float | None]) -> str:
    """Why the VOC of ``values`` is undefined ('' when it is defined)."""
    scored = [v for v in values if v is not None]
    if len(scored) < MIN_POINTS:
        return f"VOC needs at least {MIN_POINTS} scored checkpoints; this curve has {len(scored)}"
    if max(scored) - min(scored) < 1e-12:
        return "VOC is undefined for a flat curve (every checkpoint scored the same)"
    return ""


def value_order_correlation(values: Sequence[float | None], steps: Sequence[int] | None = None) -> float | None:
    """Spearman's rho between ``steps`` (default 1..n) and ``values``; unscored points are left out."""
    steps = list(steps) if steps is not None else list(range(1, len(values) + 1))
    pairs = [(s, v) for s, v in zip(steps, values) if v is not None]
    if voc_note([v for _, v in pairs]):
        return None
    from scipy.stats import spearmanr  # scipy only where a curve is summarised

    rho = spearmanr([s for s, _ in pairs], [v for _, v in pairs]).statistic
    return None if math.isnan(rho) else float(rho)


def voc_by_outcome(results: Iterable[tuple[float | None, bool]]) -> dict[str, dict[str, float | int | None]]:
    """Mean VOC of successful and of failed trajectories: ``(voc, succeeded)`` pairs in."""
    groups: dict[str, list[float]] = {"success": [], "failure": []}
    undefined = {"success": 0, "failure": 0}
    for voc, succeeded in results:
        name = "success" if succeeded else "failure"
        if voc is None:
            undefined[name] += 1
        else:
            groups[name].append(voc)
    return {name: {"mean_voc": (sum(vals) / len(vals)) if vals else None, "n": len(vals),
                   "undefined": undefined[name]} for name, vals in groups.items()}
