"""The ledger of ``select-many --batch``: the batches a run submitted, one JSON line each, written
(and fsynced) before a batch is polled, so a rerun polls them instead of sending their calls again.

    ledger = BatchLedger(out_ledger(Path("picks.jsonl")))      # picks.jsonl.batches
    ledger.record(batch_id, base_url, "/v1/chat/completions", [request_id(base_url, path, body), ...])
    ledger.entries()                                           # what a rerun reads back
    ledger.drop({batch_id})                                    # the file goes with its last batch
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any


def out_ledger(picks: Path) -> Path:
    """Where the batches of the select-many run writing ``picks`` are recorded."""
    return picks.with_name(picks.name + ".batches")


def request_id(base_url: str, path: str, body: dict[str, Any]) -> str:
    """A request's ``custom_id``: a digest of where it goes and what it sends (the same request, the same id)."""
    text = json.dumps({"url": base_url, "path": path, "body": body}, sort_keys=True, ensure_ascii=False)
    return "vs-" + hashlib.sha256(text.encode()).hexdigest()[:40]


class BatchLedger:
    """The batches a run submitted, one JSON line each, on disk before the batch is polled."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def entries(self) -> list[dict[str, Any]]:
        if not self.path.is_file():
            return []
        found = []
        for raw in self.path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(raw)
            except ValueError:
                continue  # a line cut off by a kill: that batch is not recorded (its calls are asked again)
            if isinstance(entry, dict) and isinstance(entry.get("batch"), str):
                found.append(entry)
        return found

    def record(self, batch_id: str, base_url: str, endpoint: str, custom_ids: list[str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = {"batch": batch_id, "base_url": base_url, "endpoint": endpoint, "custom_ids": custom_ids}
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")
            out.flush()
            os.fsync(out.fileno())

    def drop(self, done: set[str]) -> None:
        """Forget the batches ``done``; the file goes when nothing else is recorded."""
        kept = [entry for entry in self.entries() if entry["batch"] not in done]
        if not kept:
            self.path.unlink(missing_ok=True)
            return
        part = self.path.with_name(self.path.name + ".part")
        part.write_text("".join(json.dumps(entry) + "\n" for entry in kept), encoding="utf-8")
        os.replace(part, self.path)
