"""picks.jsonl: one line per task of a ``select-many`` run, written as each decision finishes.

    picks = PicksFile(Path("picks.jsonl"))
    done = picks.resume()                 # tasks already decided (kept); failed ones are asked again
    picks.append(PickRecord(task="t1", pick="run-3", confidence=0.93, ...))

Each line is a JSON object (schema ``veriscale.pick/1``, ``veriscale/schemas/pick.schema.json``):
``task``, ``pick`` (the chosen run's id, null when the task failed), ``confidence``, ``decided``,
``ranking`` (run ids, best first), ``n_candidates``, ``method``, ``cost`` (model calls, cache hits,
prompt and completion tokens), ``run_id`` (the store run of this decision), ``notes`` and ``error``
(null, or one sentence: why there is no pick). A line is flushed and fsynced before the next task is
reported, so a killed run loses at most the line being written; :meth:`PicksFile.resume` drops such a
torn last line (and says so) and rewrites the file with one line per decided task.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from veriscale.errors import UserError

SCHEMA = "veriscale.pick/1"


@dataclass
class PickRecord:
    """One task's decision (or why there is none: ``error``)."""

    task: str
    pick: str | None = None
    confidence: float | None = None
    decided: bool = False
    ranking: list[str] = field(default_factory=list)
    n_candidates: int = 0
    method: str = ""
    cost: dict[str, Any] = field(default_factory=dict)
    run_id: int | None = None
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PickRecord:
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)


class PicksFile:
    """The picks file of one ``select-many`` run: read back to resume, appended to as tasks finish."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.notes: list[str] = []

    def read(self) -> dict[str, PickRecord]:
        """Every task's last line (a later line of a task supersedes an earlier one)."""
        if not self.path.exists():
            return {}
        if not self.path.is_file():
            raise UserError(f"'{self.path}' is not a file: give -o a file path for the picks")
        records: dict[str, PickRecord] = {}
        text = self.path.read_bytes()
        lines = text.split(b"\n")
        torn = len(lines) if not text.endswith(b"\n") else None  # the last line, when no newline ended it
        for number, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            try:
                data = json.loads(raw)
                if not isinstance(data, dict) or not isinstance(data.get("task"), str):
                    raise ValueError("not a pick line")
            except ValueError:
                if number == torn:
                    self.notes.append(f"'{self.path}' line {number} was cut off (a run stopped while writing it): "
                                      "that task is decided again")
                    continue
                raise UserError(f"'{self.path}' line {number} is not a picks line: give -o a new file, or the "
                                "picks.jsonl of an earlier select-many run to resume it") from None
            records[data["task"]] = PickRecord.from_dict(data)
        return records

    def resume(self) -> dict[str, PickRecord]:
        """The tasks already decided (no ``error``); the file is rewritten to hold just those, so a task
        decided again after a failure has one line."""
        done = {task: rec for task, rec in self.read().items() if rec.error is None}
        if self.path.exists():
            part = self.path.with_name(self.path.name + ".part")
            with part.open("w", encoding="utf-8") as out:
                for rec in done.values():
                    out.write(json.dumps(rec.to_dict(), ensure_ascii=False) + "\n")
                out.flush()
                os.fsync(out.fileno())
            os.replace(part, self.path)
        return done

    def append(self, record: PickRecord) -> None:
        """Write ``record`` as one line, on disk before this returns."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(record.to_dict(), ensure_ascii=False) + "\n")
            out.flush()
            os.fsync(out.fileno())


class PicksList:
    """Picks kept in memory (a server job's result): nothing to resume, each record appended."""

    def __init__(self) -> None:
        self.records: list[PickRecord] = []
        self.notes: list[str] = []

    def resume(self) -> dict[str, PickRecord]:
        return {}

    def append(self, record: PickRecord) -> None:
        self.records.append(record)
