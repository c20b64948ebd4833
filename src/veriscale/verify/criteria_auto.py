"""Generated criteria (``criteria="auto"``): the verifier model proposes C criteria from the task's text.

The model sees the task alone (never a candidate, never an expected answer) and its reply is held
to one JSON shape by a grammar: llama.cpp GBNF on the embedded model and on llama.cpp servers,
``response_format`` with a JSON schema on a server that offers it. The call goes through the
gateway as a chat call, so it is cached by task and model: a rerun makes no model call::

    count = auto_count("auto:4")                     # 4; None for a pack name or a file
    found = generate_criteria(executor, task_text, count=3, references=["42"])
    found.criteria        # a CriteriaSet named "auto", ready for a Verifier
    found.rejected        # [(name, why)]: criteria that quoted the expected output or a reference
    criteria_markdown(found.criteria, "for task.md")  # the pack format: loads back with load_criteria(path)

A backend that cannot hold a reply to a grammar or schema (no ``grammar`` or ``response_format``
chat option) is one sentence naming the fix: a pack.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from veriscale.errors import ModelCallError, UserError, setting
from veriscale.verify.criteria import CriteriaSet, Criterion

AUTO = "auto"
REPEATED = "repeats another criterion's name"
DEFAULT_COUNT = 3
MAX_COUNT = 8
NAME_MAX = 40
DESC_MIN = 20
DESC_MAX = 240
#: how every description opens: a criterion is about the response (it keeps a small model on the subject)
DESC_OPENING = "The response "
#: fields of a task's JSON (or a run's metadata) that hold what a correct answer is
REFERENCE_FIELDS = ("expected", "expected_output", "expected_answer", "reference", "references", "reference_answer",
                    "gold", "gold_answer", "answer", "target", "solution", "ground_truth")
PROMPT = """You write evaluation criteria for judging responses to a task. Read the task and propose exactly \
{count} criteria that together decide whether a response is good.

Rules:
- Each criterion has a name of one to three words and a one- or two-sentence description of what it checks, \
starting "The response".
- The criteria must be different from one another and specific to this task.
- Never state the expected answer, a final result, a number or any text that a correct response must \
contain: describe how to check a response, not what it should say.

Reply with JSON only: {{"criteria": [{{"name": "...", "description": "..."}}, ...]}}

# Task
{task}"""


@dataclass
class GeneratedCriteria:
    """What :func:`generate_criteria` found: the kept criteria, those dropped and why, and the cost."""

    criteria: CriteriaSet
    rejected: list[tuple[str, str]] = field(default_factory=list)
    cached: bool = False
    constraint: str = ""  # "grammar" or "response_format"

    def to_dict(self) -> dict[str, Any]:
        return {"criteria": [{"name": c.name, "description": c.description} for c in self.criteria.items],
                "rejected": [{"name": n, "why": why} for n, why in self.rejected],
                "cached": self.cached, "constraint": self.constraint}


def auto_count(spec: str | None) -> int | None:
    """How many criteria ``spec`` asks to generate (``auto``: 3, ``auto:N``), or None when it names a pack."""
    if spec is None or not (spec == AUTO or spec.startswith(AUTO + ":")):
        return None
    raw = spec[len(AUTO) + 1:] if ":" in spec else str(DEFAULT_COUNT)
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_COUNT:
        raise UserError(f"{setting('criteria', spec)} asks for a number of criteria that is not 1 to {MAX_COUNT}: "
                        f"give {setting('criteria', 'auto')} or e.g. {setting('criteria', 'auto:4')}")
    return int(raw)


def json_schema(count: int) -> dict[str, Any]:
    """The reply's shape as a JSON schema (for ``response_format``)."""
    item = {"type": "object", "additionalProperties": False, "required": ["name", "description"],
            "properties": {"name": {"type": "string", "minLength": 1, "maxLength": NAME_MAX},
                           "description": {"type": "string", "minLength": DESC_MIN, "maxLength": DESC_MAX}}}
    return {"type": "object", "additionalProperties": False, "required": ["criteria"],
            "properties": {"criteria": {"type": "array", "minItems": count, "maxItems": count, "items": item}}}


def gbnf(count: int) -> str:
    """The same shape as a llama.cpp grammar: exactly ``count`` items, bounded plain strings (no quote,
    backslash or control character, so no escape is ever needed)."""
    items = " \", \" ".join(["item"] * count)
    return "\n".join([
        f'root ::= "{{\\"criteria\\": [" {items} "]}}"',
        'item ::= "{\\"name\\": \\"" name "\\", \\"description\\": \\"" desc "\\"}"',
        "name ::= [A-Z] [a-z]{1,12} (\" \" [a-z]{1,12}){0,2}",  # one to three words, under NAME_MAX
        f'desc ::= "{DESC_OPENING}" [^"\\\\\\x00-\\x1f]{{{DESC_MIN - len(DESC_OPENING)},{DESC_MAX - len(DESC_OPENING)}}}',
    ]) + "\n"


def max_reply_tokens(count: int) -> int:
    """Enough tokens for the longest reply the grammar allows (a token holds at least one character)."""
    return 16 + count * (NAME_MAX + DESC_MAX + 32)


def constraint_options(backend: Any, count: int) -> tuple[str, dict[str, Any]]:
    """The chat option that holds ``backend``'s reply to the shape: ``grammar`` on the embedded model and
    on a server whose read probe found llama.cpp's grammar, else ``response_format`` where the backend
    takes it; a backend with neither raises the one-sentence UserError."""
    from veriscale.models.abilities import ReadPlanned, chat_options

    taken = chat_options(backend)
    if "grammar" in taken:
        native = bool(getattr(backend, "is_embedded", False))
        if native or (isinstance(backend, ReadPlanned) and getattr(backend.read_plan(), "joint", None) == "grammar"):
            return "grammar", {"grammar": gbnf(count)}
    if "response_format" in taken:
        return "response_format", {"response_format": {"type": "json_schema", "json_schema": {
            "name": "criteria", "strict": True, "schema": json_schema(count)}}}
    raise cannot_follow(getattr(backend, "display_name", "this model"))


def cannot_follow(model: str) -> UserError:
    return UserError(f"{model} cannot hold its reply to a grammar or JSON schema, so {setting('criteria', AUTO)} "
                     f"cannot generate criteria with it: use a pack such as {setting('criteria', 'general')}, or a model "
                     "that takes a grammar (the embedded model, a llama.cpp server)")


def generate_criteria(executor: Any, task: str, *, count: int = DEFAULT_COUNT,
                      references: list[str] | tuple[str, ...] = ()) -> GeneratedCriteria:
    """Ask ``executor``'s model (a :class:`veriscale.engine.sync_facade.CallExecutor`) for ``count``
    criteria for ``task``; drop those that quote a reference; raise a UserError when the reply is not
    the shape asked for or too few criteria are left."""
    kind, options = constraint_options(executor.model, count)
    messages = [{"role": "user", "content": PROMPT.format(count=count, task=task.strip())}]
    hits = executor.usage.cache_hits
    try:
        reply = executor.chat(messages, max_tokens=max_reply_tokens(count), temperature=0.0, seed=0,
                              options=options, label="criteria auto")
    except ModelCallError as exc:
        raise UserError(f"generating criteria failed ({exc}): {cannot_follow(executor.model.display_name)}") from None
    items = parse_reply(reply.content, count, executor.model.display_name)
    kept, rejected = screen(items, references)
    repeats = sum(why == REPEATED for _, why in rejected)
    least = max(1, (count - repeats + 1) // 2)  # half the distinct criteria: a repeat is no criterion lost
    if len(kept) < least:
        why = "; ".join(f"'{n}' {w}" for n, w in rejected) or "none were usable"
        raise UserError(f"only {len(kept)} of the {count} generated criteria are usable ({why}): rerun with "
                        f"{setting('criteria', f'auto:{count + len(rejected)}')}, or use a pack")
    return GeneratedCriteria(CriteriaSet(AUTO, "", tuple(kept)), rejected, executor.usage.cache_hits > hits, kind)


def parse_reply(text: str, count: int, model: str) -> list[Criterion]:
    """The criteria of a reply that validates against :func:`json_schema`; anything else is one sentence
    (a ``response_format`` server may not enforce the schema it was given)."""
    bad = UserError(f"{model} did not reply with {count} criteria in the JSON shape asked for, so "
                    f"{setting('criteria', AUTO)} has nothing to use: use a pack, or a model that takes a grammar")
    import jsonschema

    try:
        data = json.loads(text)
        jsonschema.validate(data, json_schema(count))
    except (ValueError, jsonschema.ValidationError):
        raise bad from None
    return [Criterion(" ".join(item["name"].split()), item["description"].strip()) for item in data["criteria"]]


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())


def quotes(text: str, reference: str) -> bool:
    """Whether ``text`` quotes ``reference`` (case, punctuation and spacing ignored): the whole of it as
    words, or for a long reference any eight of its words in a row."""
    ref, hay = _norm(reference), f" {_norm(text)} "
    if not ref:
        return False
    if f" {ref} " in hay:
        return True
    words = ref.split()
    return len(words) > 8 and any(f" {' '.join(words[i:i + 8])} " in hay for i in range(len(words) - 7))


def screen(items: list[Criterion], references: list[str] | tuple[str, ...]) -> tuple[list[Criterion], list[tuple[str, str]]]:
    """``items`` split into those kept and those dropped (a repeated name, a quoted reference), with why."""
    kept: list[Criterion] = []
    rejected: list[tuple[str, str]] = []
    for crit in items:
        if any(crit.name.casefold() == k.name.casefold() for k in kept):
            rejected.append((crit.name, REPEATED))
        elif any(quotes(f"{crit.name}\n{crit.description}", ref) for ref in references):
            rejected.append((crit.name, "quotes the task's expected output or a reference"))
        else:
            kept.append(crit)
    return kept, rejected


def references_in(data: Any, task_text: str = "") -> list[str]:
    """The reference texts a task's JSON object (or a run's metadata) carries, ``task_text`` left out."""
    if not isinstance(data, dict):
        return []
    found: list[str] = []
    for name in REFERENCE_FIELDS:
        value = data.get(name)
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, (str, int, float)) and not isinstance(v, bool) and str(v).strip() \
                    and str(v).strip() != task_text.strip():
                found.append(str(v))
    return found


def criteria_markdown(crits: CriteriaSet, title: str = "") -> str:
    """``crits`` in the pack format (``veriscale.verify.criteria``): it loads back as the same criteria."""
    lines = [f"# Generated criteria{' ' + title if title else ''}", ""]
    if crits.note:
        lines += [crits.note, ""]
    for c in crits.items:
        lines += [f"## {c.name}", *([f"> Why: {c.rationale}"] if c.rationale else []), c.description, ""]
    return "\n".join(lines)
