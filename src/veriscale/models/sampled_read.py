"""A sampled read, for models that give no logprobs: N draws of the grade at temperature 1.

The empirical label distribution stands in for the label probabilities; its standard error is
reported beside the reward, and every draw is paid for::

    draws = ["A", " B", "A.", "I think"]
    label_counts(draws, ("A", "B", "C"))       # ({"A": 2, "B": 1, "C": 0}, 3): one draw off-format
    sampled_distribution(draws, ("A", "B", "C"))   # ({"A": 0.667, "B": 0.333, "C": 0.0}, mass 0.75)
    value_se({"A": 0.667, "B": 0.333}, {"A": 1.0, "B": 0.5}, n=3)   # standard error of E

A server that takes ``n`` answers N choices in one request; one that does not (fewer choices than
asked) is asked again, one request a draw, each with its own seed, so the draws stay reproducible.
"""

from __future__ import annotations

import math

from veriscale.errors import UserError, setting

#: tokens a draw may spend: a leading space or newline, then the grade
SAMPLE_MAX_TOKENS = 3
SAMPLE_TEMPERATURE = 1.0
#: sampler settings that leave the model's distribution as it is: servers' defaults cut or bend it
#: (llama.cpp: top_k 40, top_p 0.95, min_p 0.05 and a repeat penalty of 1.1 that falls on every
#: score label the prompt names). OpenAI's own fields first; the rest are llama.cpp's and vLLM's.
FAITHFUL_SAMPLER = {"top_p": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0}
FAITHFUL_SAMPLER_EXTRA = {"top_k": 0, "min_p": 0.0, "repeat_penalty": 1.0, "repetition_penalty": 1.0}
#: the read method of a server that refused the extra fields mid-run: its own top_k / min_p may apply
SERVER_SAMPLER_METHOD = "sample-server-sampler"


def check_sample_count(n: int, where: str) -> int:
    """``n`` as a sample count (at least 2), else a UserError naming ``where``."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise UserError(f"sample={n!r} in {where} is too few draws to estimate a distribution: give {setting('model')} "
                        "a URI with ?sample=16 (at least 2; 16 to 32 is usual)")
    return n


def drawn_label(text: str, labels: tuple[str, ...]) -> str | None:
    """The label a draw wrote: its first word (Markdown emphasis and quotes aside) is the label, or starts
    with it and goes on with a sign that is no letter or digit ("A.", "A+", "**B**", "7/10"); None when
    it wrote none."""
    word = text.strip().split()[0] if text.strip() else ""
    word = word.lstrip("*_`\"'([")  # Markdown emphasis or a quote around the grade: "**B**"
    for lab in sorted(labels, key=len, reverse=True):
        if word == lab or (word.startswith(lab) and not word[len(lab)].isalnum()):
            return lab
    return None


def label_counts(draws: list[str], labels: tuple[str, ...]) -> tuple[dict[str, int], int]:
    """How many draws wrote each label, and how many wrote any."""
    counts = {lab: 0 for lab in labels}
    for text in draws:
        lab = drawn_label(text, labels)
        if lab is not None:
            counts[lab] += 1
    return counts, sum(counts.values())


def sampled_distribution(draws: list[str], labels: tuple[str, ...]) -> tuple[dict[str, float], float]:
    """The empirical label distribution (renormalised over labelled draws) and the labelled share."""
    counts, labelled = label_counts(draws, labels)
    probs = {lab: (c / labelled if labelled else 0.0) for lab, c in counts.items()}
    return probs, (labelled / len(draws) if draws else 0.0)


def value_se(probs: dict[str, float], values: dict[str, float], n: int) -> float | None:
    """The standard error of E = sum p(l) v(l) estimated from ``n`` labelled draws (None when n < 2)."""
    if n < 2:
        return None
    mean = sum(p * values[lab] for lab, p in probs.items())
    var = sum(p * (values[lab] - mean) ** 2 for lab, p in probs.items())
    return math.sqrt(var * n / (n - 1) / n)


def pooled_se(ses: list[float | None]) -> float | None:
    """The standard error of the mean of independent estimates with these standard errors."""
    known = [s for s in ses if s is not None]
    if not known or len(known) != len(ses):
        return None
    return math.sqrt(sum(s * s for s in known)) / len(known)
