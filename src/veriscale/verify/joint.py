"""Joint scoring for the Verifier: one model call reads every criterion (and both sides of a pair).

    v = Verifier(model, joint=True)          # or --joint, VERISCALE_JOINT=1, [scoring] joint = true
    v.score(task, cand).usage.model_calls    # 1 for C criteria (plus any slot re-asked alone)
    v.compare(task, a, b).usage.model_calls  # 2: one call per slot order

``plan_*`` build one joint call per repeat (``verify.joint_prompts``); :func:`split` turns each
joint reply into the same per-slot readings as separate scoring, and every slot the reply could
not give (never reached, written off format, no probability on a label) becomes the ordinary
separate request for that slot, asked alone, counted as a call, and named in the notes
("slot Output re-asked alone: ..."). Backends without joint support (``supports_joint``) and
sampled reasoning are scored separately, with a note saying so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from veriscale import settings

if TYPE_CHECKING:  # keep this module light to import
    from veriscale.engine.sync_facade import CallOutcome, PlannedCall
    from veriscale.verify.results import ReadingTag

JOINT_ENV = "VERISCALE_JOINT"
def joint_default() -> bool:
    """What Verifiers built without ``joint=`` do: the command's ``--joint`` or ``scoring.joint``, else
    ``$VERISCALE_JOINT`` (1/true/on or 0/false/off), else off."""
    return settings.value("joint") == "on"  # --joint, scoring.joint, $VERISCALE_JOINT (1/true/on, 0/false/off)


def supports(model: Any) -> bool:
    """Whether ``model`` reads a joint request's slots (``models.abilities.JointReads``)."""
    from veriscale.models.abilities import reads_joint

    return reads_joint(model)


def plan_score(v: Any, task: str, candidate: str, repeats: list) -> list["PlannedCall"]:
    """One joint call per repeat reading every criterion of ``candidate``."""
    from veriscale.engine.sync_facade import PlannedCall
    from veriscale.verify.joint_prompts import joint_pointwise_request, joint_slots
    from veriscale.verify.results import ReadingTag

    crits = v.criteria.items
    calls = []
    for rep in repeats:
        req = joint_pointwise_request(task, candidate, crits, v.criteria.note, v.scale, mitigation=v.injection_mitigation)
        tags = [ReadingTag(name, rep.index, "candidate", None, None, rep.seed) for name, _ in joint_slots(crits, pairwise=False)]
        calls.append(PlannedCall(req, JointTag(tags, {"task": task, "candidate": candidate})))
    return calls


def plan_compare(v: Any, task: str, a: str, b: str, repeats: list) -> list["PlannedCall"]:
    """One joint call per slot order reading every criterion of both responses."""
    from veriscale.engine.sync_facade import PlannedCall
    from veriscale.verify.joint_prompts import joint_pairwise_request, joint_slots
    from veriscale.verify.results import ReadingTag

    crits = v.criteria.items
    calls = []
    for rep in repeats:
        first, second = (a, b) if rep.order == "AB" else (b, a)
        req = joint_pairwise_request(task, first, second, crits, v.criteria.note, v.scale,
                                     mitigation=v.injection_mitigation)
        tags = []
        for name, slot in joint_slots(crits, pairwise=True):
            who = ("a" if slot == "A" else "b") if rep.order == "AB" else ("b" if slot == "A" else "a")
            tags.append(ReadingTag(name, rep.index, who, slot, rep.order, rep.seed))
        calls.append(PlannedCall(req, JointTag(tags, {"task": task, "first": first, "second": second})))
    return calls


class JointTag:
    """A joint call's bookkeeping: the reading tag of each slot, and the texts to re-ask a slot alone."""

    def __init__(self, slots: list["ReadingTag"], texts: dict[str, str]) -> None:
        self.slots = slots
        self.texts = texts


def split(outcomes: list["CallOutcome"], read: Callable[["ReadingTag", dict | None, "CallOutcome", bool], Any],
          alone: Callable[["ReadingTag", dict[str, str]], "PlannedCall"]) -> tuple[list, list["PlannedCall"], list[str]]:
    """Readings of every joint slot that could be read, the separate calls for the rest, and notes.

    ``read(tag, slot_entry, outcome, first)`` makes a Reading (``slot_entry`` None: the call failed);
    ``alone(tag, texts)`` plans the ordinary request for one slot."""
    readings, again, notes = [], [], []
    for o in outcomes:
        tag: JointTag = o.call.tag
        if o.response is None:  # the call itself failed: every slot carries its error
            readings += [read(t, None, o, i == 0) for i, t in enumerate(tag.slots)]
            continue
        got = o.response.slots
        if not got and len(tag.slots) == 1:  # one criterion, pointwise: an ordinary one-slot reply
            resp = o.response
            got = [{"label_probs": resp.label_probs, "label_mass": resp.label_mass, "unseen_mass": resp.unseen_mass}]
        for i, t in enumerate(tag.slots):
            entry = got[i] if i < len(got) else None
            problem = _problem(entry)
            if problem is None:
                readings.append(read(t, entry, o, i == 0))
                continue
            again.append(alone(t, tag.texts))
            side = f" for the {'first' if t.slot == 'A' else 'second'} response" if t.slot else ""
            notes.append(f"slot {t.criterion}{side} (repeat {t.repeat}) re-asked alone: {problem}")
    return readings, again, notes


def _problem(entry: dict | None) -> str | None:
    if entry is None:
        return "the joint reply did not reach it"
    mass = entry.get("label_mass")
    if entry.get("problem"):
        return str(entry["problem"])
    if not isinstance(mass, (int, float)) or not mass > 0:
        return "no probability on any score label"
    return None
