"""veriscale: fine-grained verification of AI agent runs.

    from veriscale import compare, score
    score(task, answer).reward                       # pointwise reward in [0, 1]
    compare(task, a, b).p_a_wins                     # P(a beats b)

    from veriscale import Verifier, load_backend, select
    v = Verifier(load_backend("embedded"), criteria="agent")
    select(task, candidates, verifier=v).best.id     # Best-of-N: tournament + Bradley–Terry

``score``/``compare`` are one-call helpers (``veriscale.api``; ``ascore``/``acompare``/``aselect``
are the same, awaited); ``Verifier`` keeps one model,
scale, criteria set and store across many verdicts. ``select`` and ``Selection`` come from
``veriscale.selection.select``, ``track`` and ``ProgressTracker`` (progress curves of a run's
prefixes) from ``veriscale.progress``. Every name is imported on first use, so ``import
veriscale`` loads neither numpy nor scipy::

    from veriscale import track
    track(task, trajectory).voc                      # Value-Order Correlation of the curve
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from veriscale.api import acompare, ascore, aselect, compare, score
    from veriscale.models.uri import load_backend
    from veriscale.progress import ProgressTracker, track
    from veriscale.selection.select import Selection, select
    from veriscale.verify.results import CompareResult, Reading, ScoreResult
    from veriscale.verify.reward import Verifier

__all__ = [
    "CompareResult",
    "Reading",
    "ScoreResult",
    "ProgressTracker",
    "Selection",
    "Verifier",
    "acompare",
    "ascore",
    "aselect",
    "compare",
    "load_backend",
    "score",
    "select",
    "track",
]
__version__ = "0.1.0"

# every public name is imported on first use, so ``import veriscale`` (and each CLI process) stays cheap
_LAZY = {**dict.fromkeys(("acompare", "ascore", "aselect", "compare", "score"), "veriscale.api"),
         "load_backend": "veriscale.models.uri", "Verifier": "veriscale.verify.reward",
         **dict.fromkeys(("CompareResult", "Reading", "ScoreResult"), "veriscale.verify.results"),
         "select": "veriscale.selection.select", "Selection": "veriscale.selection.select",
         "track": "veriscale.progress", "ProgressTracker": "veriscale.progress"}


def __getattr__(name: str) -> Any:
    """A public name, imported when first asked for (``from veriscale import score`` works as usual)."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'veriscale' has no attribute '{name}'")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
