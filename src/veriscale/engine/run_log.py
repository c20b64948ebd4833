"""What a run reports while it runs, and the steps it looked at, kept in the store.

Events (``run_events``) are appended in order by whichever process runs the command — a CLI
``track --follow``, a server job — and read by id, so a reader in another process (the
dashboard's event stream) sees each one once, in order. Steps (``run_steps``) are the
trajectories a run judged, one row a step, paged and searched by the trajectory viewer. A row's
``index`` is its 0-based place (what ``offset`` counts); its ``step`` is the number users see,
1-based as a progress curve and ``veriscale track`` count (checkpoint 3 is the third step)::

    log = RunLog(store)
    log.emit(run_id, "point", {"step": 3, "value": 0.4})
    for event in log.since(run_id, after=0):            # RunEvent(id, kind, data, at)
        ...
    log.record_steps(run_id, "t1", trajectory.steps)     # appends after what is there
    log.steps(run_id, "t1", offset=4000, limit=200)      # [{"index", "step", "role", "text", "error", "detail"}]
    log.find_steps(run_id, "t1", "Traceback")            # indices of matching steps
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from veriscale.engine.store import Store

#: The event kinds commands emit: a progress point, a progress event (stall, regression, likely
#: done), calls done of planned, a status change, a trajectory's new steps, a budget step, and
#: tasks done of planned (select-many).
EVENT_KINDS = ("point", "event", "calls", "status", "steps", "budget", "tasks")


@dataclass(frozen=True)
class RunEvent:
    id: int
    kind: str
    data: dict[str, Any]
    at: float

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "data": self.data, "at": self.at}


def step_text(step: Any) -> str:
    """One step as the viewer shows it: what was said, the tool calls, what came back."""
    parts = [step.text] if step.text else []
    for call in step.tool_calls or []:
        parts.append("→ " + json.dumps(call, ensure_ascii=False, default=str))
    if step.observation:
        parts.append(step.observation)
    return "\n".join(parts)


def step_detail(step: Any) -> dict[str, Any] | None:
    """A step's structure as the viewer shows it (tool calls as blocks, each result tied to its
    call, per-step time and tokens), or None when the text says it all."""
    detail = {"tool_calls": list(step.tool_calls or []), "tool_results": dict(getattr(step, "tool_results", None) or {}),
              "observation": step.observation or "", "exit_code": step.exit_code,
              "metrics": dict(getattr(step, "metrics", None) or {})}
    if not (detail["tool_calls"] or detail["observation"] or detail["metrics"]):
        return None
    return {"text": step.text or "", **detail}


def step_failed(step: Any) -> bool:
    """A step whose command exited non-zero (the viewer's jump-to-error stops there)."""
    return step.exit_code not in (None, 0)


def _detail_json(step: Any) -> str | None:
    detail = step_detail(step)
    return None if detail is None else json.dumps(detail, ensure_ascii=False, default=str)


class RunLog:
    """Events and steps of runs, in one store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    # -- events --------------------------------------------------------------------------
    def emit(self, run_id: int, kind: str, data: dict[str, Any]) -> int:
        if kind not in EVENT_KINDS:
            raise ValueError(f"unknown run event kind {kind!r}: use one of {', '.join(EVENT_KINDS)}")
        _, rowid = self.store.execute("INSERT INTO run_events (run_id, kind, data, at) VALUES (?, ?, ?, ?)",
                                      (run_id, kind, json.dumps(data, default=str), time.time()))
        return int(rowid or 0)

    def since(self, run_id: int, after: int = 0, limit: int = 1000) -> list[RunEvent]:
        """The run's events with id above ``after``, oldest first."""
        rows, _ = self.store.execute(
            "SELECT id, kind, data, at FROM run_events WHERE run_id = ? AND id > ? ORDER BY id LIMIT ?",
            (run_id, after, limit))
        return [RunEvent(r[0], r[1], json.loads(r[2]), r[3]) for r in rows]

    def point_emitter(self, run_id: int, trajectory: str) -> Callable[[Any], None]:
        """``on_point`` for ``ProgressJudge.point_feed``: each checkpoint's point as a ``point`` event."""
        def on_point(point: Any) -> None:
            self.emit(run_id, "point", {"trajectory": trajectory, "point": point.to_dict()})

        return on_point

    def emit_events(self, run_id: int, trajectory: str, events: Iterable[Any]) -> None:
        """A curve's stall, regression and likely-done events, as ``event`` events."""
        for event in events:
            self.emit(run_id, "event", {"trajectory": trajectory, "event": event.to_dict()})

    def last(self, run_id: int, kind: str | None = None) -> RunEvent | None:
        """The run's newest event (of ``kind``), or None."""
        sql = "SELECT id, kind, data, at FROM run_events WHERE run_id = ?"
        params: list[int | str] = [run_id]
        if kind is not None:
            sql += " AND kind = ?"
            params.append(kind)
        rows, _ = self.store.execute(sql + " ORDER BY id DESC LIMIT 1", params)
        return RunEvent(rows[0][0], rows[0][1], json.loads(rows[0][2]), rows[0][3]) if rows else None

    # -- steps ---------------------------------------------------------------------------
    def record_steps(self, run_id: int, trajectory: str, steps: Iterable[Any], start: int | None = None) -> int:
        """Store ``steps`` (``data.model.Step``) from index ``start`` (default: after the last); returns the count now."""
        first = self.count_steps(run_id, trajectory) if start is None else start
        rows = [(run_id, trajectory, first + k, s.role, step_text(s), int(step_failed(s)), _detail_json(s))
                for k, s in enumerate(steps)]
        if rows:
            self.store.execute_many("INSERT OR REPLACE INTO run_steps (run_id, trajectory, idx, role, text, error, detail) "
                                    "VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        return first + len(rows)

    def record_candidates(self, run_id: int, candidates: Iterable[Any]) -> None:
        """The steps of every candidate that has a trajectory, under the candidate's id."""
        for cand in candidates:
            if cand.trajectory is not None and cand.trajectory.steps:
                self.record_steps(run_id, cand.id, cand.trajectory.steps, start=0)

    def trajectories(self, run_id: int) -> list[dict[str, Any]]:
        """``[{"trajectory", "steps", "errors"}]`` for every trajectory the run stored."""
        rows, _ = self.store.execute(
            "SELECT trajectory, COUNT(*), SUM(error) FROM run_steps WHERE run_id = ? GROUP BY trajectory "
            "ORDER BY MIN(rowid)", (run_id,))
        return [{"trajectory": r[0], "steps": r[1], "errors": r[2] or 0} for r in rows]

    def count_steps(self, run_id: int, trajectory: str) -> int:
        rows, _ = self.store.execute("SELECT COUNT(*) FROM run_steps WHERE run_id = ? AND trajectory = ?",
                                     (run_id, trajectory))
        return int(rows[0][0])

    def steps(self, run_id: int, trajectory: str, offset: int = 0, limit: int = 200) -> list[dict[str, Any]]:
        rows, _ = self.store.execute(
            "SELECT idx, role, text, error, detail FROM run_steps WHERE run_id = ? AND trajectory = ? AND idx >= ? "
            "ORDER BY idx LIMIT ?", (run_id, trajectory, offset, limit))
        return [{"index": r[0], "step": r[0] + 1, "role": r[1], "text": r[2], "error": bool(r[3]),
                 "detail": json.loads(r[4]) if r[4] else None}
                for r in rows]

    def find_steps(self, run_id: int, trajectory: str, text: str | None = None, *, errors: bool = False,
                   limit: int = 10_000) -> list[int]:
        """Indices of the steps containing ``text`` (case-insensitive), or of the failed ones."""
        sql = "SELECT idx FROM run_steps WHERE run_id = ? AND trajectory = ?"
        params: list[Any] = [run_id, trajectory]
        if errors:
            sql += " AND error = 1"
        if text:
            sql += " AND instr(lower(text), lower(?)) > 0"
            params.append(text)
        rows, _ = self.store.execute(sql + " ORDER BY idx LIMIT ?", (*params, limit))
        return [r[0] for r in rows]
