"""The protocol's one phase vocabulary: phase names, record kinds, skill-session names and aliases.

Usage::

    PHASES                        # ("resolve", "challenge", "adjudicate", "deliver")
    RECORD_KIND["adjudicate"]     # "finish": the record schema a phase's session writes
    session_for("falsify")        # "challenger": the skill session of a phase or alias
    protocol_phase("repair")      # "deliver": the protocol phase of a phase or skill-session name
"""

from __future__ import annotations

from veriscale.errors import UserError

PHASES = ("resolve", "challenge", "adjudicate", "deliver")
#: The record (schema) kind each phase's session writes.
RECORD_KIND = {"resolve": "resolver", "challenge": "challenger", "adjudicate": "finish", "deliver": "repair"}
#: The skill session of each phase (what skills a session gets is keyed by these names).
PHASE_SESSION = {"resolve": "resolver", "challenge": "challenger", "adjudicate": "adjudication",
                 "deliver": "delivery"}
_SESSION_TO_PHASE = {session: phase for phase, session in PHASE_SESSION.items()}

#: Skill stages: a skill folder is named ``<stage>-<name>``.
STAGES: tuple[str, ...] = ("evidence", "resolve", "falsify", "repair")
SESSION_STAGES: dict[str, tuple[str, ...]] = {
    "resolver": ("evidence", "resolve"),
    "challenger": ("evidence", "falsify"),
    "adjudication": ("evidence",),
    "delivery": ("evidence", "repair"),
}
#: Other names accepted for a skill session: the phase names and a few synonyms.
SESSION_ALIASES: dict[str, str] = {
    "resolve": "resolver",
    "challenge": "challenger",
    "falsify": "challenger",
    "adjudicate": "adjudication",
    "adjudicator": "adjudication",
    "deliver": "delivery",
    "repair": "delivery",
}


def session_for(phase: str) -> str:
    """Normalise a session/phase name (``resolver``, ``falsify``, ``repair``, ...) to a session."""
    key = phase.strip().lower()
    key = SESSION_ALIASES.get(key, key)
    if key not in SESSION_STAGES:
        known = ", ".join(sorted(SESSION_STAGES))
        raise UserError(f"unknown phase '{phase}': use one of {known}")
    return key


def stages_for(phase: str) -> tuple[str, ...]:
    """Skill stages a session receives, e.g. ``stages_for("adjudication") == ("evidence",)``."""
    return SESSION_STAGES[session_for(phase)]


def protocol_phase(name: str) -> str:
    """``resolve``/``challenge``/``adjudicate``/``deliver`` for a phase or skill-session name
    (``resolver``, ``falsify``, ``adjudication``, ``repair``, ...); UserError for anything else."""
    if name in PHASES:
        return name
    try:
        return _SESSION_TO_PHASE[session_for(name)]
    except UserError:
        raise UserError(f"unknown phase '{name}': use resolve, challenge, adjudicate or deliver "
                        "(or a skill phase name: resolver, falsify, adjudication, repair, ...)") from None
