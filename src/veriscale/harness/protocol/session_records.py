"""Schema-checked records the protocol's sessions write: resolver and challenger ledgers,
``finish.json`` (adjudication) and ``repair.json`` (delivery).

Each record is JSON checked against its bundled schema (``schemas/<kind>.schema.json``) and then
against what the schema cannot see: unique entry ids, resolver verdicts that name a candidate
of the agenda (or ``none of them`` / ``cannot tell``), a base that is a real rollout, evidence
references that point at existing ledger entries, no revisions under the ``pick-only``
contract::

    problems = check_resolver(doc, agenda)            # [] when the ledger is valid
    doc, problems = read_record(path, "finish", context=RecordContext(rollouts=["r01", "r02"],
                                evidence_ids={"resolver:R1"}, contract="artifact"))
    check = record_check("resolver", RecordContext(agenda=agenda))   # for AgentSession.run(check=...)

A problem is one sentence the model (or the run report) can act on.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from veriscale.data.reader import BadInput, parse_json
from veriscale.harness.jsonfiles import load_schema as read_schema
from veriscale.harness.safe_fs import UnsafePath, read_text_beneath

MAX_RECORD_BYTES = 4 << 20
RECORD_KINDS = ("resolver", "challenger", "finish", "repair")
CONTRACTS = ("pick-only", "artifact")
VERDICT_NONE = "none of them"
VERDICT_UNKNOWN = "cannot tell"
BASE_NONE = "none"


@dataclass
class RecordContext:
    """What a record is checked against beyond its schema."""

    agenda: dict[str, Any] | None = None          # resolver: verdicts must name a candidate
    rollouts: list[str] = field(default_factory=list)  # finish: valid base labels
    evidence_ids: set[str] = field(default_factory=set)  # finish/repair: "resolver:R1", ...
    contract: str = "artifact"                     # finish: pick-only allows no revisions


@lru_cache(maxsize=None)
def load_schema(kind: str) -> dict[str, Any]:
    """The bundled JSON Schema of a record kind (``resolver``, ``challenger``, ``finish``, ``repair``)."""
    return read_schema("veriscale.harness.protocol", kind)


#: Schema problems collected from one record at most: a ledger of a million empty entries is
#: refused after these, not after millions of errors (issue 30).
MAX_SCHEMA_PROBLEMS = 5
#: Keywords that bound a record's size: the first of these stops the check at once.
_SIZE_KEYWORDS = frozenset({"maxItems", "maxLength", "maxProperties"})


@lru_cache(maxsize=None)
def _validator(kind: str) -> Any:
    import jsonschema

    return jsonschema.Draft202012Validator(load_schema(kind))


def first_schema_errors(errors: Any, limit: int = MAX_SCHEMA_PROBLEMS) -> list[Any]:
    """At most ``limit`` errors taken lazily from ``errors`` (``iter_errors``); a size error ends it.

    The schemas list ``maxItems`` before ``items``, so an oversized array is refused before a
    single entry is looked at.
    """
    taken = []
    for error in errors:
        taken.append(error)
        if len(taken) >= limit or error.validator in _SIZE_KEYWORDS:
            break
    return taken


def schema_message(error: Any, max_chars: int = 300) -> str:
    """One short sentence for a schema error: jsonschema's messages quote the whole bad value."""
    instance = error.instance
    if error.validator == "maxItems":
        return f"holds {len(instance)} items, more than the {error.validator_value} allowed: write fewer"
    if error.validator == "maxLength":
        return f"is {len(instance)} characters long, more than the {error.validator_value} allowed: shorten it"
    if error.validator == "maxProperties":
        return f"has {len(instance)} keys, more than the {error.validator_value} allowed: write fewer"
    message = error.message
    return message if len(message) <= max_chars else message[: max_chars - 30] + f" ... [{len(message)} chars]"


def schema_problems(doc: Any, kind: str, *, limit: int = MAX_SCHEMA_PROBLEMS) -> list[str]:
    """Schema violations of ``doc``, one sentence each (with the JSON path of the bad part).

    At most ``limit`` are collected (the first ones the validator finds, lazily), and a size
    violation (``maxItems``, ``maxLength``, ``maxProperties``) ends the check: the cost of a
    hostile record is bounded by the first few errors, not by its size.
    """
    errors = first_schema_errors(_validator(kind).iter_errors(doc), limit)
    problems = []
    for error in sorted(errors, key=lambda e: [(isinstance(p, str), p) for p in e.absolute_path]):
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        problems.append(f"{kind} record at {where}: {schema_message(error)}")
    if len(errors) >= limit:
        problems.append(f"{kind} record: the check stopped after its first {limit} problems; fix these first")
    return problems


def _duplicate_ids(entries: list[dict[str, Any]], kind: str) -> list[str]:
    seen: set[str] = set()
    problems = []
    for entry in entries:
        if entry["id"] in seen:
            problems.append(f"{kind} entry id {entry['id']} is used twice: give every entry its own id")
        seen.add(entry["id"])
    return problems


def _same_value(verdict: str, display: str) -> bool:
    if verdict.strip() == display.strip():
        return True
    try:
        a, b = float(verdict.replace(",", "")), float(display.replace(",", ""))
    except ValueError:
        return False
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)


def check_resolver(doc: Any, agenda: dict[str, Any] | None = None) -> list[str]:
    """Problems of a resolver ledger; verdicts of agenda claims must name one of its candidates."""
    problems = schema_problems(doc, "resolver")
    if problems:
        return problems
    entries = doc["entries"]
    problems += _duplicate_ids(entries, "resolver")
    items = {item["key"]: item for item in (agenda or {}).get("items", [])}
    for entry in entries:
        verdict = entry["verdict"].strip()
        if verdict.lower() in (VERDICT_NONE, VERDICT_UNKNOWN):
            continue
        item = items.get(entry.get("claim", ""))
        if item is None:
            continue
        displays = [str(c["display"]) for c in item["candidates"]]
        if not any(_same_value(verdict, d) for d in displays):
            problems.append(
                f"resolver entry {entry['id']} gives verdict {verdict!r} for {item['key']}, which is not one of its "
                f"candidates ({', '.join(displays)}): use one of them, '{VERDICT_NONE}' or '{VERDICT_UNKNOWN}'"
            )
    return problems


def check_challenger(doc: Any) -> list[str]:
    """Problems of a challenger ledger."""
    problems = schema_problems(doc, "challenger")
    return problems or _duplicate_ids(doc["entries"], "challenger")


def evidence_ids(resolver: Any | None, challenger: Any | None) -> set[str]:
    """The citable ids (``resolver:R1``, ``challenger:C2``) of the ledgers that are valid."""
    ids: set[str] = set()
    for prefix, doc in (("resolver", resolver), ("challenger", challenger)):
        if isinstance(doc, dict):
            ids |= {f"{prefix}:{e['id']}" for e in doc.get("entries", []) if isinstance(e, dict) and "id" in e}
    return ids


def _unknown_refs(refs: list[str], known: set[str], where: str) -> list[str]:
    return [f"{where} cites {ref}, which is no entry of a valid ledger: cite only existing entries"
            for ref in refs if ref not in known]


def check_finish(doc: Any, context: RecordContext) -> list[str]:
    """Problems of ``finish.json``: base label, evidence references, the contract's rule."""
    problems = schema_problems(doc, "finish")
    if problems:
        return problems
    base = doc["base"]
    if base != BASE_NONE and base not in context.rollouts:
        problems.append(f"finish base {base!r} is not a rollout of this task: use one of "
                        f"{', '.join(context.rollouts) or '(none)'} or '{BASE_NONE}'")
    if context.contract == "pick-only" and doc["revisions"]:
        problems.append("the pick-only contract allows no revisions: leave 'revisions' empty and list "
                        "doubts under 'unresolved'")
    if context.contract == "pick-only" and base == BASE_NONE:
        problems.append(f"the pick-only contract needs a base rollout, not '{BASE_NONE}'")
    for number, revision in enumerate(doc["revisions"], start=1):
        problems += _unknown_refs(revision["evidence"], context.evidence_ids, f"revision {number}")
    return problems


def check_repair(doc: Any, context: RecordContext) -> list[str]:
    """Problems of ``repair.json``: the schema and its evidence references."""
    problems = schema_problems(doc, "repair")
    if problems:
        return problems
    for number, change in enumerate(doc["changes"], start=1):
        problems += _unknown_refs(change["evidence"], context.evidence_ids, f"change {number}")
    return problems


def check_record(kind: str, doc: Any, context: RecordContext | None = None) -> list[str]:
    """Problems of a record of ``kind`` (see :data:`RECORD_KINDS`)."""
    context = context or RecordContext()
    if kind == "resolver":
        return check_resolver(doc, context.agenda)
    if kind == "challenger":
        return check_challenger(doc)
    if kind == "finish":
        return check_finish(doc, context)
    if kind == "repair":
        return check_repair(doc, context)
    raise ValueError(f"unknown record kind {kind!r}")


def read_record(path: Path, kind: str, context: RecordContext | None = None) -> tuple[Any | None, list[str]]:
    """Load and check a record file: ``(document, [])`` when valid, ``(document or None, problems)``.

    The record is opened without following links (a session may have planted one); a link, a
    FIFO, a missing file or one over :data:`MAX_RECORD_BYTES` all get the same answer, so the
    message never tells whether some other path exists.
    """
    path = Path(path)
    try:
        text = read_text_beneath(path.parent, path.name, max_bytes=MAX_RECORD_BYTES)
    except (UnsafePath, OSError):
        return None, [f"{kind} record {path} was not written (as a regular file of at most {MAX_RECORD_BYTES} bytes)"]
    except UnicodeDecodeError:
        return None, [f"{kind} record {path} is not UTF-8 text: write JSON"]
    try:  # depth, number length and surrogates bounded: a bomb is a record problem, not a crash
        doc = parse_json(text, f"{kind} record {path}")
    except json.JSONDecodeError as exc:
        return None, [f"{kind} record {path} is not valid JSON ({exc})"]
    except BadInput as exc:
        return None, [str(exc)]
    return doc, check_record(kind, doc, context)


def record_check(kind: str, context: RecordContext | None = None):
    """A ``path -> problem text or None`` check for :meth:`AgentSession.run`."""

    def check(path: Path) -> str | None:
        _, problems = read_record(path, kind, context)
        return " ".join(problems[:5]) if problems else None

    return check
