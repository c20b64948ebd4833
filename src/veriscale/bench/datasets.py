"""Bench inputs: labelled pairs, or pools of labelled runs grouped by task, with a seeded subsample.

    pairs = load_pairs("pairwise_dev.jsonl")                    # [LabelledPair]
    pools = load_labelled_pools(["terminal_bench_2.1_trials.jsonl.gz"])   # [LabelledPool]
    sample(pairs, limit=10, seed=0)                              # same 10 every time

Pairs: JSONL, one object a line with ``instruction``, ``output_1``, ``output_2`` and ``label``
(1 or 2: which output is better); ``id`` is optional. Pools: any format the importers read, grouped
by task; each run's label is its first present field among ``LABEL_KEYS`` (a bool counts as 1/0).
``detect_kind`` tells the two apart from the first record.
"""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, TypeVar

import numpy as np

from veriscale.data.importers._files import read_text
from veriscale.data.reader import JsonLimit, decode_json
from veriscale.data.model import Candidate, Task
from veriscale.data.pool import load_pool
from veriscale.errors import UserError, setting

LABEL_KEYS = ("reward", "resolved", "passed", "success", "label")
PAIR_FIELDS = ("instruction", "output_1", "output_2", "label")
T = TypeVar("T")


@dataclass(frozen=True)
class LabelledPair:
    id: str
    instruction: str
    output_1: str
    output_2: str
    label: int


@dataclass
class LabelledPool:
    task_id: str
    task: Task
    candidates: list[Candidate]
    labels: list[float]

    @property
    def disagrees(self) -> bool:
        """True when the runs do not all have the same label (something to choose between)."""
        return len(set(self.labels)) > 1


def _open_text(path: Path):
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open(encoding="utf-8")


def detect_kind(path: str | Path) -> str:
    """``"pairs"`` when the first record has the pair fields, else ``"pools"``."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"bench data '{path}' is not a file: pass a JSONL of labelled pairs or of labelled runs")
    try:
        with _open_text(p) as fh:
            for line in fh:
                if line.strip():
                    record = decode_json(line)
                    break
            else:
                raise UserError(f"bench data '{path}' is empty: give it labelled pairs or runs, one JSON object a line")
    except (ValueError, OSError, EOFError, zlib.error):  # JSONDecodeError, JsonLimit, bad UTF-8 or gzip
        return "pools"  # not line-JSON within the caps: let the importers tell the format (and say what is wrong)
    return "pairs" if isinstance(record, dict) and all(f in record for f in PAIR_FIELDS) else "pools"


def load_pairs(path: str | Path) -> list[LabelledPair]:
    """Every labelled pair in a JSONL file; a malformed line raises a UserError naming it."""
    pairs = []
    for number, line in enumerate(read_text(Path(path)).splitlines(), 1):  # regular files only, gzip-aware, UTF-8
        if not line.strip():
            continue
        try:
            record = decode_json(line)
        except json.JSONDecodeError:
            raise UserError(f"line {number} of '{path}' is not JSON: write one pair object per line") from None
        except JsonLimit as exc:
            raise UserError(f"line {number} of '{path}' {exc}: fix or remove that line") from None
        if not isinstance(record, dict):
            raise UserError(f"line {number} of '{path}' is not a JSON object: write one pair object per line")
        missing = [f for f in PAIR_FIELDS if f not in record]
        if missing:
            raise UserError(f"line {number} of '{path}' lacks {', '.join(missing)}: each pair needs "
                            f"{', '.join(PAIR_FIELDS)}")
        if record["label"] not in (1, 2, "1", "2"):
            raise UserError(f"line {number} of '{path}' has label {record['label']!r:.40}: use 1 or 2 (which output is better)")
        pairs.append(LabelledPair(str(record.get("id", f"pair-{number}")), str(record["instruction"]),
                                  str(record["output_1"]), str(record["output_2"]), int(record["label"])))
    if not pairs:
        raise UserError(f"'{path}' holds no pairs: give one JSON object a line")
    return pairs


def run_label(candidate: Candidate) -> float | None:
    """The run's label as a number in [0, 1], or None when it has none."""
    for key in LABEL_KEYS:
        if key in candidate.labels:
            value = candidate.labels[key]
            if isinstance(value, bool):
                return 1.0 if value else 0.0
            try:
                return float(value)
            except (TypeError, ValueError):
                return None
    return None


def load_labelled_pools(paths: Sequence[str | Path], *, min_runs: int = 2) -> list[LabelledPool]:
    """Pools of labelled runs by task (tasks with fewer than ``min_runs`` runs are left out)."""
    groups = load_pool(paths)
    pools = []
    for key, group in groups.items():
        labels = [run_label(c) for c in group.candidates]
        unlabelled = [c.id for c, lab in zip(group.candidates, labels) if lab is None]
        if unlabelled:
            raise UserError(f"run {unlabelled[0]} has no label ({', '.join(LABEL_KEYS)}): bench needs labelled runs")
        if group.task is None or not key:
            raise UserError("the runs do not say which task they belong to: bench pools need runs that carry their task")
        if len(group.candidates) >= min_runs:
            pools.append(LabelledPool(key, group.task, list(group.candidates), [float(x) for x in labels]))
    if not pools:
        raise UserError(f"no task in {', '.join(map(str, paths))} has {min_runs} or more runs: bench pools need several runs per task")
    return pools


def sample(items: Sequence[T], limit: int | None, seed: int) -> list[T]:
    """A seeded subsample of ``limit`` items in their original order (all when None or larger)."""
    if limit is not None and limit < 0:
        raise UserError(f"{setting('limit')} {limit} is negative: give 0 (everything) or a positive number")
    if not limit or limit >= len(items):
        return list(items)
    chosen = np.random.default_rng(seed).choice(len(items), size=limit, replace=False)
    return [items[i] for i in sorted(int(i) for i in chosen)]
