"""What makes a score reply usable: probability on the score labels at the slot.

    problem = score_reply_problem(resp)     # None, or why the reply cannot grade (a sentence part)
    if problem: ...                         # the gateway records the call as failed with it

A reply that fails this is a failed call, never an ok one: a rerun asks again. At temperature
0 the gateway asks once more in the same run (the backend's ``retry_variant()``, e.g. more
top_logprobs) before it reports :func:`cannot_grade`.

A joint reply (``resp.slots``) is usable as long as it is one: a slot it could not read (even every slot) is
re-asked alone by the Verifier (``veriscale.verify.joint``), so only probabilities that are not
numbers are a problem here.
"""

from __future__ import annotations

import math

from veriscale.models.base import ScoreRequest, ScoreResponse

NO_LABEL_MASS = "no probability on any score label (the model answered off-format)"


def score_reply_problem(resp: ScoreResponse) -> str | None:
    """Why ``resp`` cannot grade, or None when it can."""
    if resp.slots:
        readable = [s for s in resp.slots if _mass_ok(s.get("label_mass"))]
        if any(not isinstance(p, (int, float)) or math.isnan(p) for s in readable for p in s["label_probs"].values()):
            return "label probabilities that are not numbers"
        return None
    mass = resp.label_mass
    if not isinstance(mass, (int, float)) or math.isnan(mass) or mass <= 0:
        return NO_LABEL_MASS
    if any(not isinstance(p, (int, float)) or math.isnan(p) for p in resp.label_probs.values()):
        return "label probabilities that are not numbers"
    return None


def deterministic(request: ScoreRequest) -> bool:
    """Whether asking again the same way would give the same reply (no sampled reasoning)."""
    return not request.reasoning or request.temperature <= 0


def cannot_grade(problem: str, retried: str | None = None) -> str:
    """The failure of a deterministic call whose reply stayed off-format (``retried``: how it was asked again)."""
    again = f", also when asked again {retried}" if retried else ""
    return f"the judge cannot grade this: {problem}{again}"


def _mass_ok(mass: object) -> bool:
    return isinstance(mass, (int, float)) and not math.isnan(mass) and mass > 0
