"""A verdict told in words, for the tools that show a reason next to a number (Inspect AI's Score
explanation, DeepEval's metric reason)::

    reason_for(score_result.to_dict())
    # "veriscale reward 0.77 from embedded with criteria 'general' on the letters:20 scale:
    #  Correctness 0.79 (likeliest label A); ... Low label mass: ..."
"""

from __future__ import annotations

from typing import Any


def likeliest(probs: dict[str, float]) -> str | None:
    """The label holding the most probability (the first of a tie), or None for no distribution."""
    return max(probs.items(), key=lambda item: item[1])[0] if probs else None


def reason_for(verdict: dict[str, Any]) -> str:
    """One paragraph from a ``ScoreResult.to_dict()``: the reward, each criterion's reward and likeliest
    label, then the verdict's notes, low label mass and suspected injection."""
    parts = []
    for name, entry in verdict["criteria"].items():
        reward, top = entry.get("reward"), likeliest(entry.get("label_probs") or {})
        parts.append(f"{name} {reward:.2f}" + (f" (likeliest label {top})" if top else "")
                     if reward is not None else f"{name} unscored")
    text = (f"veriscale reward {verdict['reward']:.2f} from {verdict['model']} with criteria "
            f"'{verdict['criteria_set']}' on the {verdict['scale']} scale: {'; '.join(parts)}.")
    if verdict.get("notes"):
        text += " Notes: " + " ".join(n.rstrip(".") + "." for n in verdict["notes"])
    if verdict.get("low_label_mass"):
        text += " Low label mass: the model mostly did not answer in the scale's format, so read this reward warily."
    if verdict.get("injection_suspected"):
        text += " Injection suspected: the output holds text shaped like instructions to the verifier."
    return text
