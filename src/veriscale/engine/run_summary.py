"""One line per recorded run for ``veriscale runs list``, read from the result each command stores.

    run_summary(record)   # "reward 0.759" | "P(A beats B) 0.612" | "pick r2 (confidence 0.93)"
                          # | "3 tasks: 2 revised, 1 error" | "failed: <first error>"

What each command stores as its run's result:

- ``score``: ``ScoreResult.to_dict()``, with ``reward`` (None and ``errors`` when calls failed);
- ``compare``: ``CompareResult.to_dict()``, with ``p_a_wins``, ``reward_a``, ``reward_b``;
- ``select``: ``Selection.to_dict()``, with ``best.id`` and ``confidence``;
- ``bench``: the report, with ``n_items``, ``kind`` and one row per configuration;
- ``harness run``: a ``tasks`` list of ``{"outcome": ...}``;
- ``track`` / ``track --follow``: ``curves``, each with ``voc`` and its points;
- ``proxy chat`` / ``proxy responses`` / ``proxy anthropic``: ``how`` (agreed, verified, ...),
  ``winner`` and the ``candidates``;
- ``bench --progress``: the report, with ``kind``, ``n_items`` and ``metrics``;
- any command that failed before a verdict: ``{"error": "..."}``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from veriscale.engine.store import RunRecord

MAX_ERROR_CHARS = 160


def _clip(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


def _failure(result: dict[str, Any]) -> str | None:
    if result.get("error"):
        return f"failed: {_clip(result['error'])}"
    errors = result.get("errors") or []
    if errors:
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        return f"failed: {_clip(errors[0])}{more}"
    return None


def _score(result: dict[str, Any]) -> str:
    reward = result.get("reward")
    return "no verdict" if reward is None else f"reward {reward:.3f}"


def _compare(result: dict[str, Any]) -> str:
    p = result.get("p_a_wins")
    if p is None:
        return "no verdict"
    rewards = [result.get("reward_a"), result.get("reward_b")]
    if None in rewards:
        return f"P(A beats B) {p:.3f}"
    return f"P(A beats B) {p:.3f} (rewards {rewards[0]:.3f} / {rewards[1]:.3f})"


def _select(result: dict[str, Any]) -> str:
    best = (result.get("best") or {}).get("id")
    if best is None:
        return "no pick"
    confidence = result.get("confidence")
    if confidence is None:
        return f"pick {best} (no confidence: {result.get('method') or 'pointwise'})"
    return f"pick {best} (confidence {confidence:.2f})"


def _bench(result: dict[str, Any]) -> str:
    rows = result.get("rows") or []
    n = result.get("n_items")
    return f"{n} {result.get('kind') or 'items'}, {len(rows)} configuration{'s' if len(rows) != 1 else ''}"


def _outcomes(result: dict[str, Any]) -> str:
    tasks = [t for t in result.get("tasks") or [] if isinstance(t, dict)]
    counts = Counter(str(t.get("outcome", "unknown")) for t in tasks)
    listed = ", ".join(f"{n} {outcome}" for outcome, n in counts.most_common())
    return f"{len(tasks)} task{'s' if len(tasks) != 1 else ''}: {listed}" if tasks else "no tasks"


def _track(result: dict[str, Any]) -> str:
    curves = [c for c in result.get("curves") or [] if isinstance(c, dict)]
    if len(curves) != 1:
        return f"{len(curves)} curves"
    curve, voc = curves[0], curves[0].get("voc")
    ended = f", ended {result['ended']}" if result.get("ended") else ""
    return (f"{len(curve.get('points') or [])} checkpoints, VOC "
            + ("n/a" if voc is None else f"{voc:.3f}") + ended)


def _bench_progress(result: dict[str, Any]) -> str:
    metrics = (result.get("metrics") or {}).get("continuous") or {}
    if result.get("kind") == "first_error":
        f1 = metrics.get("first_error_f1")
        return f"{result.get('n_items')} solutions, first-error F1 " + ("n/a" if f1 is None else f"{f1:.3f}")
    by = metrics.get("voc_by_outcome") or {}
    parts = [f"{name} {g['mean_voc']:.3f}" for name, g in by.items() if g.get("mean_voc") is not None]
    return f"{result.get('n_items')} runs, mean VOC " + (", ".join(parts) or "n/a")


def _proxy(result: dict[str, Any]) -> str:
    n = len(result.get("candidates") or [])
    failed = sum(1 for c in result.get("candidates") or [] if c.get("error"))
    extra = f", {failed} failed" if failed else ""
    return f"{result.get('how')}: candidate {result.get('winner')} of {n}{extra} ({result.get('latency_s', 0):.2f} s)"


SUMMARISERS: dict[str, Callable[[dict[str, Any]], str]] = {
    "proxy chat": _proxy,
    "proxy responses": _proxy,
    "proxy anthropic": _proxy,
    "track": _track,
    "track --follow": _track,
    "bench --progress": _bench_progress,
    "score": _score,
    "compare": _compare,
    "select": _select,
    "bench": _bench,
    "harness run": _outcomes,
}


def run_summary(record: RunRecord) -> str:
    """The run's verdict in a few words, its error text when it failed, or why there is none."""
    if getattr(record, "damaged", ()):
        return f"damaged: its stored {' and '.join(record.damaged)} cannot be read (the store was changed outside veriscale)"
    result = record.result
    if result is None:
        return "not finished (still running, or stopped before it recorded a result)" if record.status == "running" else ""
    if not isinstance(result, dict):
        return ""
    failure = _failure(result)
    if failure is not None:
        return failure
    summarise = SUMMARISERS.get(record.command)
    if summarise is None and isinstance(result.get("tasks"), list):
        summarise = _outcomes
    return summarise(result) if summarise is not None else ""
