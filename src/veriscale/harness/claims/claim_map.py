"""The claim map: which claims the rollouts agree on, dispute, or leave out (deterministic).

Every claim key (see :mod:`.extract`) falls in exactly one class:

- **consensus**: every rollout has the claim and all values agree (numbers within ``rel_tol``).
  Agreement is not proof: rollouts can share the same wrong value, so consensus claims still
  go to the challenger.
- **disputed**: two or more distinct values. Each candidate value lists its support and the
  rollouts behind it; rollouts without the claim are listed in ``missing_from``.
- **omitted**: one agreed value, but some rollouts lack the claim (who has it, who not).

Usage::

    claim_map = build_claim_map(Path("tasks/finance"))
    claim_map.counts()                 # {"consensus": 61, "disputed": 9, "omitted": 14}
    paths = report.write_claim_map(claim_map, Path("tasks/finance.claims"))   # claims.json, agenda.json, claims.md

The resolver's agenda (``build_agenda``) ranks disputed claims by expected information gain;
see ``information_gain`` and ``build_agenda`` for the model and the weighting heuristic.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from veriscale.errors import UserError
from veriscale.harness.claims.extract import Claim, Value
from veriscale.harness.claims.extract_worker import extract_claims
from veriscale.harness.jsonfiles import load_schema as read_schema
from veriscale.harness.workspace.contract import TaskWorkspace

SCHEMA_VERSION = 1
DEFAULT_REL_TOL = 1e-6
DEFAULT_ALPHA = 0.5
STATUSES = ("consensus", "disputed", "omitted")


@dataclass
class CandidateValue:
    """One value a disputed (or agreed) claim takes, and the rollouts that state it."""

    value: Value
    rollouts: list[str]
    formulas: list[str] = field(default_factory=list)

    @property
    def support(self) -> int:
        return len(self.rollouts)

    @property
    def display(self) -> str:
        return display_value(self.value)


@dataclass
class ClaimRecord:
    """A claim key across all rollouts, with its class."""

    key: str
    kind: str
    file: str
    locator: str
    group: str
    status: str
    candidates: list[CandidateValue]
    missing_from: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key, "kind": self.kind, "file": self.file, "locator": self.locator,
            "group": self.group, "status": self.status,
            "candidates": [
                {"value": c.value, "display": c.display, "support": c.support, "rollouts": c.rollouts,
                 **({"formulas": c.formulas} if c.formulas else {})}
                for c in self.candidates
            ],
            "missing_from": self.missing_from,
        }


@dataclass
class ClaimMap:
    """All claim records of one task."""

    task: str
    rollouts: list[str]
    rel_tol: float
    claims: list[ClaimRecord]
    warnings: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {status: sum(1 for c in self.claims if c.status == status) for status in STATUSES}

    def by_key(self) -> dict[str, ClaimRecord]:
        return {c.key: c for c in self.claims}

    def with_status(self, status: str) -> list[ClaimRecord]:
        return [c for c in self.claims if c.status == status]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION, "task": self.task, "rollouts": self.rollouts,
            "rel_tol": self.rel_tol, "counts": self.counts(), "warnings": self.warnings,
            "claims": [c.to_dict() for c in self.claims],
        }


def display_value(value: Value) -> str:
    """Short human form: ``0.1875``, ``570000``, ``'Q1'``, ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.10g}"
    return value


def values_agree(a: Value, b: Value, rel_tol: float) -> bool:
    """Numbers agree within ``rel_tol`` (and 1e-12 absolute); anything else must be equal."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=rel_tol, abs_tol=1e-12)
    return type(a) is type(b) and a == b


def _natural(text: str) -> list[Any]:
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", text)]


def classify(claims_by_rollout: dict[str, list[Claim]], *, rel_tol: float = DEFAULT_REL_TOL) -> list[ClaimRecord]:
    """Group claims by key across rollouts and give each key its class."""
    labels = sorted(claims_by_rollout)
    per_key: dict[str, dict[str, Claim]] = {}
    for label in labels:
        for claim in claims_by_rollout[label]:
            per_key.setdefault(claim.key, {}).setdefault(label, claim)
    records: list[ClaimRecord] = []
    for key, stated in per_key.items():
        candidates: list[CandidateValue] = []
        for label in labels:
            if label not in stated:
                continue
            claim = stated[label]
            match = next((c for c in candidates if values_agree(c.value, claim.value, rel_tol)), None)
            if match is None:
                match = CandidateValue(value=claim.value, rollouts=[])
                candidates.append(match)
            match.rollouts.append(label)
            if claim.formula and claim.formula not in match.formulas:
                match.formulas.append(claim.formula)
        candidates.sort(key=lambda c: (-c.support, c.display))
        missing = [label for label in labels if label not in stated]
        if len(candidates) > 1:
            status = "disputed"
        elif missing:
            status = "omitted"
        else:
            status = "consensus"
        first = next(iter(stated.values()))
        records.append(ClaimRecord(key, first.kind, first.file, first.locator, first.group, status, candidates, missing))
    records.sort(key=lambda r: (_natural(r.file), r.kind != "file", _natural(r.locator)))
    return records


def build_claim_map(task_dir: Path, *, rel_tol: float = DEFAULT_REL_TOL) -> ClaimMap:
    """Read a materialised task and build its claim map; needs at least two rollouts."""
    if not rel_tol >= 0:
        raise UserError(f"relative tolerance {rel_tol} is negative: give a value such as 1e-6")
    task = TaskWorkspace.open(Path(task_dir))
    if len(task.rollouts) < 2:
        raise UserError(
            f"task '{task.path}' has one rollout: a claim map compares rollouts, so it needs at least two "
            "(with one, every claim would look like consensus)"
        )
    files = {r.label: r.relative_deliverables() for r in task.rollouts}
    claims, warnings = extract_claims(files)
    empty = [label for label, found in files.items() if not found]
    warnings += [f"{label} delivered no files" for label in empty]
    return ClaimMap(task.name, sorted(files), rel_tol, classify(claims, rel_tol=rel_tol), warnings)


# --- resolver agenda -------------------------------------------------------------------------


def candidate_prior(supports: Sequence[int], *, alpha: float = DEFAULT_ALPHA) -> list[float]:
    """Prior over [candidate 1, ..., candidate k, none of them]: support + ``alpha``, normalised.

    The extra outcome is "every candidate is wrong", which no amount of support rules out.
    """
    weights = [s + alpha for s in supports] + [alpha]
    total = sum(weights)
    return [w / total for w in weights]


def information_gain(supports: Sequence[int], *, alpha: float = DEFAULT_ALPHA) -> float:
    """Expected information gain (bits) of a check that reveals which candidate is true.

    A check that settles the claim removes all uncertainty, so its expected gain (Lindley)
    equals the entropy of the prior from ``candidate_prior``.
    """
    return -sum(p * math.log2(p) for p in candidate_prior(supports, alpha=alpha) if p > 0)


_CHECKS = {
    "xlsx_cell": "recompute {locator} from its inputs and compare the candidate formulas",
    "sheet": "check whether the task requires sheet {locator}",
    "csv_cell": "re-derive {locator} from the input rows and the task's cleaning rules",
    "csv_rows": "re-apply the task's row rules (filters, dedupe) to the inputs and count the rows",
    "json_field": "recompute {locator} from the inputs or the delivered data files",
    "text_number": "trace '{locator}' to its source figure or computation in the inputs",
    "file": "check whether the task asks for {file}",
}

AGENDA_HEURISTIC = (
    "priority = gain_bits * (1 + log2(1 + related_claims)); gain_bits is the entropy of the "
    "candidate prior (support + alpha, plus a 'none of them' outcome with alpha); related_claims "
    "counts the other claims in the same group (xlsx sheet, csv row, json parent object, text "
    "file), since settling one value there usually settles or re-checks its neighbours; the log "
    "keeps a large sheet from drowning a sharper split elsewhere."
)


def build_agenda(claim_map: ClaimMap, *, alpha: float = DEFAULT_ALPHA) -> dict[str, Any]:
    """Disputed claims ranked for the resolver, most informative check first."""
    group_sizes: dict[str, int] = {}
    for record in claim_map.claims:
        group_sizes[record.group] = group_sizes.get(record.group, 0) + 1
    items = []
    for record in claim_map.with_status("disputed"):
        supports = [c.support for c in record.candidates]
        gain = information_gain(supports, alpha=alpha)
        related = group_sizes[record.group] - 1
        prior = candidate_prior(supports, alpha=alpha)
        items.append({
            "key": record.key, "kind": record.kind, "file": record.file, "locator": record.locator,
            "group": record.group, "gain_bits": round(gain, 6), "related_claims": related,
            "priority": round(gain * (1 + math.log2(1 + related)), 6),
            "candidates": [
                {"value": c.value, "display": c.display, "support": c.support, "prior": round(p, 6),
                 "rollouts": c.rollouts}
                for c, p in zip(record.candidates, prior)
            ],
            "prior_none_of_them": round(prior[-1], 6),
            "missing_from": record.missing_from,
            "check": _CHECKS[record.kind].format(locator=record.locator, file=record.file),
        })
    items.sort(key=lambda item: (-item["priority"], -item["gain_bits"], _natural(item["key"])))
    for rank, item in enumerate(items, start=1):
        item["rank"] = rank
    return {
        "schema_version": SCHEMA_VERSION, "task": claim_map.task, "alpha": alpha,
        "heuristic": AGENDA_HEURISTIC, "items": items,
    }


# --- files -----------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def load_schema(name: str) -> dict[str, Any]:
    """A bundled JSON Schema: ``claims`` or ``agenda``."""
    return read_schema("veriscale.harness.claims", name)


def validate(document: dict[str, Any], name: str) -> None:
    """Raise ``jsonschema.ValidationError`` when ``document`` does not fit schema ``name``.

    The first error the validator finds is raised, taken lazily: ``jsonschema.validate`` would
    collect every error to pick the "best" one, which a hostile 16 MiB file makes millions.
    """
    import jsonschema

    error = next(jsonschema.Draft202012Validator(load_schema(name)).iter_errors(document), None)
    if error is not None:
        raise error
