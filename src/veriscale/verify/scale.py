"""Score scales: G ordered labels mapped linearly onto [0, 1] (best label = 1.0).

    scale = parse_scale("letters")      # G=20, labels A..T, A best
    scale = parse_scale("letters:5")    # A..E
    scale = parse_scale("digits")       # 1..9, 9 best
    scale = parse_scale("yesno")        # G=2: "Yes" = 1, "No" = 0
    scale = parse_scale("labels:good,ok,bad")   # your own labels, best first
    scale.expectation({"A": 0.5, "B": 0.5})   # expected value in [0, 1]
"""

from __future__ import annotations

import string
from dataclasses import dataclass

from veriscale.errors import UserError, setting

SCALE_NAMES = ("letters", "letters:G (2..26)", "digits", "digits:G (2..9)", "yesno", "labels:BEST,...,WORST")


@dataclass(frozen=True)
class Scale:
    """An ordered label set; ``labels[0]`` is the best, ``labels[-1]`` the worst."""

    name: str
    labels: tuple[str, ...]
    best_description: str
    worst_description: str

    @property
    def granularity(self) -> int:
        return len(self.labels)

    def value(self, label: str) -> float:
        """Linear value in [0, 1]: best label 1.0, worst 0.0."""
        i = self.labels.index(label)
        return 1.0 - i / (len(self.labels) - 1)

    def expectation(self, probs: dict[str, float]) -> float:
        """E = sum p(label) * value(label), over probabilities renormalised on the labels."""
        total = sum(probs.get(lab, 0.0) for lab in self.labels)
        if total <= 0:
            raise ValueError("no probability on any label")
        return sum(probs.get(lab, 0.0) * self.value(lab) for lab in self.labels) / total

    def argmax_value(self, probs: dict[str, float]) -> float:
        """Discrete-judge value: the value of the most probable label (ties → better label)."""
        best = max(self.labels, key=lambda lab: (probs.get(lab, 0.0), -self.labels.index(lab)))
        return self.value(best)

    def hint(self) -> str:
        """A few words that remind the model of the answer format right before the slot."""
        if self.name == "yesno":
            return "Yes or No"
        if self.name.startswith("labels:"):
            return "one of " + ", ".join(self.labels)
        kind = "letter" if self.labels[0].isalpha() else "digit"
        return f"one {kind}, {self.labels[0]} best to {self.labels[-1]} worst"

    def instruction(self) -> str:
        """The sentence that tells the model how to answer in this scale."""
        if self.name == "yesno":
            return 'Answer with exactly one word: "Yes" if it fully meets the criterion, "No" otherwise.'
        first, last = self.labels[0], self.labels[-1]
        if self.name.startswith("labels:"):
            return f"Answer with exactly one of: {', '.join(self.labels)} (best to worst)."
        return (
            f"Answer with exactly one character from {first} to {last}: {first} means "
            f"{self.best_description}, {last} means {self.worst_description}; "
            "characters in between are evenly spaced grades."
        )


def letters(g: int = 20) -> Scale:
    if not 2 <= g <= 26:
        raise UserError(f"letter scale size {g} is out of range: choose G between 2 and 26 (e.g. {setting('scale', 'letters:20')})")
    return Scale(f"letters:{g}", tuple(string.ascii_uppercase[:g]), "certainly excellent", "certainly failing")


def digits(g: int = 9) -> Scale:
    if not 2 <= g <= 9:
        raise UserError(f"digit scale size {g} is out of range: choose G between 2 and 9, "
                        f"or use {setting('scale', f'letters:{g}')} for more levels")
    labels = tuple(str(d) for d in range(g, 0, -1))  # best first
    return Scale(f"digits:{g}", labels, "certainly excellent", "certainly failing")


def yesno() -> Scale:
    return Scale("yesno", ("Yes", "No"), "meets the criterion", "does not")


def custom(labels: list[str]) -> Scale:
    labels = [lab.strip() for lab in labels]
    if len(labels) < 2 or any(not lab for lab in labels) or len(set(labels)) != len(labels):
        raise UserError("a labels: scale needs two or more distinct, non-empty labels, best first: "
                        f"e.g. {setting('scale', 'labels:good,ok,bad')}")
    return Scale("labels:" + ",".join(labels), tuple(labels), f"'{labels[0]}' (best)", f"'{labels[-1]}' (worst)")


def parse_scale(spec: str) -> Scale:
    """Build a scale from its CLI name; a bad name raises a UserError listing the valid ones."""
    if spec.strip().lower().startswith("labels:"):
        return custom(spec.strip()[len("labels:"):].split(","))
    name, _, size = spec.strip().lower().partition(":")
    try:
        g = int(size) if size else None
    except ValueError:
        g = -1
    if name == "letters" and g != -1:
        return letters(g or 20)
    if name == "digits" and g != -1:
        return digits(g or 9)
    if name in ("yesno", "yes/no", "binary") and not size:
        return yesno()
    raise UserError(f"unknown score scale '{spec}': use one of {', '.join(SCALE_NAMES)}")
