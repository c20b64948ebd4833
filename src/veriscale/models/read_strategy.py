"""How a backend reads a score slot: a typed capability, probed once, carried on every reading.

Three kinds of read, and whether the slot was prefilled:

- ``exact``: every label's probability as the weights give it (the embedded model's full
  softmax; vLLM's ``logprob_token_ids``; a completions ``logprobs`` count wide enough to show
  every label; an equal ``logit_bias`` on every label token where the server reports logprobs
  after the bias: the shift leaves the distribution over the labels as it is and brings every
  label into the top k);
- ``top-k``: what the server shows of its top k tokens, the rest reported as ``unseen_mass``;
- ``sampled``: N draws of the grade, the empirical distribution.

A read that is not prefilled is ``first-token``: the model's first generated token, which is
the grade only when the model obeys the format at once. ::

    plan = ReadPlan(ReadKind.EXACT, prefilled=True, endpoint="completions", method="wide-logprobs", width=1000)
    plan.strategy          # 'exact'
    plan.describe()        # 'exact, prefilled (completions, logprobs=1000)'
    plan.key()             # 'completions/exact/wide-logprobs/1000': enters the cache fingerprint
    FIRST_TOKEN_NOTE       # the one sentence the CLI says about an unprefilled path
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from veriscale.errors import setting, worded


#: the method of an exact read by an equal ``logit_bias`` on every label token (see ``read_probe``)
EQUAL_BIAS_METHOD = "equal-bias"
#: the bias it adds to each label token's logit (OpenAI and vLLM take at most 100)
EQUAL_BIAS = 30.0


class ReadKind(str, Enum):
    EXACT = "exact"
    TOP_K = "top-k"
    SAMPLED = "sampled"


@dataclass(frozen=True)
class ReadPlan:
    """How one backend reads a slot: ``kind``, ``prefilled``, the ``endpoint`` and ``method`` used,
    the logprobs ``width`` asked for (None where it does not apply) and what the probe noted."""

    kind: ReadKind
    prefilled: bool
    endpoint: str  # "embedded" | "completions" | "chat"
    #: "full-softmax" | "logprob_token_ids" | "wide-logprobs" | "equal-bias" | "top-logprobs" | "sample" |
    #: "sample-server-sampler" (a server that refused llama.cpp's / vLLM's sampler fields)
    method: str
    width: int | None = None
    #: the chat request fields that continue a prefilled assistant turn (empty: none needed or none work)
    prefill_fields: tuple[tuple[str, Any], ...] = ()
    notes: tuple[str, ...] = ()
    #: what holds a joint reply to its format: "grammar" (llama.cpp GBNF), "structured_outputs" (vLLM's
    #: regex), "regex" (SGLang's); None: nothing does, so joint scoring is not used on this backend
    joint: str | None = None

    @property
    def strategy(self) -> str:
        """``exact``, ``top-k``, ``sampled``, or ``first-token`` when the slot is not prefilled."""
        if not self.prefilled and self.kind is not ReadKind.SAMPLED:
            return "first-token"
        return self.kind.value

    def key(self) -> str:
        """What of the plan changes a reading: part of the backend's fingerprint (the cache key)."""
        parts = [self.endpoint, self.kind.value, "prefilled" if self.prefilled else "first-token", self.method]
        if self.width is not None:
            parts.append(str(self.width))
        if self.method == EQUAL_BIAS_METHOD:
            parts.append(f"bias={EQUAL_BIAS:g}")
        if self.joint:
            parts.append(f"joint={self.joint}")
        return "/".join(parts)

    def describe(self) -> str:
        """One phrase for people: ``exact, prefilled (completions, logprobs=1000)``."""
        how = self.method if self.width is None else f"{self.method}={self.width}"
        if self.method == EQUAL_BIAS_METHOD:
            how = f"logit_bias +{EQUAL_BIAS:g} on every label token, top_logprobs={self.width}"
        return f"{self.kind.value}, {'prefilled' if self.prefilled else 'first token (not prefilled)'} ({self.endpoint}, {how})"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["kind"] = self.kind.value
        d["strategy"] = self.strategy
        d["prefill_fields"] = dict(self.prefill_fields)
        d["notes"] = list(self.notes)
        return d


#: where a fingerprint's read part begins (``http:URL#model [weights] read=completions/exact/...``)
READ_MARK = " read="


def without_read(fingerprint: str) -> str:
    """A fingerprint without its read part: what identifies the weights (a new read is no new weights)."""
    return fingerprint.split(READ_MARK, 1)[0]


EMBEDDED_PLAN = ReadPlan(ReadKind.EXACT, prefilled=True, endpoint="embedded", method="full-softmax",
                         joint="teacher-forced")

FIRST_TOKEN_NOTE = worded(
    "This server's chat endpoint cannot continue a prefilled answer, so each reading is the model's first "
    "generated token rather than the prefilled score slot (marked first-token): it is the grade only when the "
    f"model answers in the format at once. For the prefilled slot add ?template=chatml (or llama3, gemma) to "
    f"{setting('model')} (its /v1/completions endpoint), or use a server that continues an assistant turn "
    "(vLLM, SGLang, llama-server).")


def first_token_note(strategies: set[str]) -> str | None:
    """The note a verdict carries when any of its readings was a first-token read."""
    return FIRST_TOKEN_NOTE if "first-token" in strategies else None
