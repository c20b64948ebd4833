"""What a protocol run records: each phase's state (``phases/<phase>.json``) and the outcome document.

    state = phase_state("resolve", layout.record("resolve"), problems, result)
    state["status"], state["reason"], state["calls"], state["prompt_tokens"]   # 'completed', '', 12, 48113
    stopped_state("deliver")               # {'phase': 'deliver', 'status': 'cancelled', 'reason': ...}
    document = outcome_document(header, finish, delivery, phases, layout.delivery_dir, wall_s=812.4)
    document["outcome"], document["cost"]  # 'delivered', {'calls': 41, ..., 'wall_s': 790.2}

A phase whose record is missing or invalid is failed with the validation problems as its reason; a
phase without a session (pick-only delivery) costs nothing. The outcome sums the phases' cost.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from veriscale.errors import VeriscaleError, worded
from veriscale.harness.protocol.layout import DELIVERABLES_SUBDIR
from veriscale.harness.protocol.phases import PHASES
from veriscale.harness.sessions.result import SessionResult

#: the cost of a phase that ran no session
NO_SESSION_COST = {"executor": "none", "calls": 0, "steps": 0, "prompt_tokens": 0, "completion_tokens": 0,
                   "wall_s": 0.0, "nudged": False, "recovered_calls": 0, "tokens_reported": True}
DELIVERY_KEYS = ("restored", "changed", "added", "refused")


def phase_state(phase: str, record: Path, problems: list[str], result: SessionResult | None, *,
                status: str | None = None, reason: str = "", extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The state of a finished phase: its status (``status``, else completed when the session ended
    well and its record validates, else failed), why, its record's problems and its session's cost."""
    if result is not None:
        cost = {"executor": result.executor, "calls": result.calls, "steps": result.steps,
                "prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens,
                "wall_s": result.wall_s, "nudged": result.nudged, "recovered_calls": result.recovered_calls,
                "tokens_reported": result.tokens_reported}
        reason = reason or result.reason
        session_ok = result.ok
    else:
        cost = dict(NO_SESSION_COST)
        session_ok = True
    final = status or ("completed" if session_ok and not problems else "failed")
    if final == "failed" and not reason:
        reason = "; ".join(problems)
    return {"phase": phase, "status": final, "reason": reason, "record": str(record),
            "record_valid": not problems, "problems": problems, "resumed": False, **cost, **(extra or {})}


def stopped_state(phase: str) -> dict[str, Any]:
    """The state of a phase the run was stopped during (Ctrl-C, SIGTERM)."""
    return {"phase": phase, "status": "cancelled",
            "reason": "the run was stopped during this phase; a rerun with the same run id runs it again"}


def crashed_state(phase: str, exc: Exception) -> dict[str, Any]:
    """The state of a phase an unexpected error ended (recorded instead of ending the run)."""
    return {"phase": phase, "status": "failed",
            "reason": worded(f"{type(exc).__name__}: {exc.template if isinstance(exc, VeriscaleError) else exc}")}


def outcome_document(header: dict[str, Any], finish: dict[str, Any] | None, delivery: dict[str, Any] | None,
                     phases: dict[str, dict[str, Any]], delivery_dir: Path, wall_s: float) -> dict[str, Any]:
    """``header`` (task, task_dir, run_dir, model, executor, contract, jail) then the outcome: the base
    chosen, the revisions, what was delivered, each phase's state and the cost summed over them."""
    if finish is None:
        result = "no base chosen"
    elif phases.get("deliver", {}).get("status") == "completed":
        result = "delivered"
    else:
        result = "delivered base unchanged" if delivery else "delivery failed"
    totals = {key: sum(int(p.get(key, 0) or 0) for p in phases.values())
              for key in ("calls", "steps", "prompt_tokens", "completion_tokens")}
    totals["wall_s"] = round(sum(float(p.get("wall_s", 0) or 0) for p in phases.values()), 3)
    return {
        **header, "outcome": result,
        "base": finish["base"] if finish else None,
        "revisions": len(finish["revisions"]) if finish else 0,
        "unresolved": finish["unresolved"] if finish else [],
        "deliverables_dir": str(delivery_dir / DELIVERABLES_SUBDIR) if delivery else None,
        "delivery": {k: delivery.get(k, []) for k in DELIVERY_KEYS} if delivery else None,
        "phases": {p: phases.get(p, {"phase": p, "status": "not run"}) for p in PHASES},
        "cost": totals, "run_wall_s": round(wall_s, 3),
    }
