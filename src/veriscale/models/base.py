"""What every model backend offers: label probabilities at a score slot, and chat.

A backend gets a ``ScoreRequest`` (chat messages, the assistant text to prefill up to the score
slot, the labels) and answers with the probability of every label at that slot::

    backend = load_backend("embedded")
    resp = backend.score(ScoreRequest(messages=(Message("user", "Grade it."),),
                                      prefill="Grade:", labels=("A", "B")))
    resp.label_probs   # {"A": 0.7, "B": 0.3}, renormalised over the labels
    resp.label_mass    # how much of the raw next-token probability fell on the labels

A joint request reads several slots in one call: ``joint`` holds the header text of each further
slot (the prefill ends at the first slot's header), and the reply's ``slots`` has one entry per
slot, in order (``slots[0]`` mirrors the top-level fields)::

    req = ScoreRequest(messages=msgs, prefill="Correctness:", labels=("A", "B"), joint=("\nOutput:",))
    backend.score(req).slots   # [{"label_probs": ..., "label_mass": ..., "unseen_mass": ...,
                               #   "written": "A", "problem": None}, {...}]
"""

from __future__ import annotations

from collections.abc import Coroutine, Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, Union, runtime_checkable

if TYPE_CHECKING:
    from veriscale.data.images import ImagePart

T = TypeVar("T")
#: one piece of a message with images: its text, or an image (``veriscale.data.images.ImagePart``)
Part = Union[str, "ImagePart"]


@dataclass(frozen=True)
class Message:
    """One chat message. ``parts``, when set, is its content in order, text and images
    (:meth:`with_parts`); ``content`` is then its text with each image as a placeholder (what token
    counts and text-only views read)::

        Message("user", "Grade it.")
        Message.with_parts("user", ["## Response", frame_1, frame_2, "Grade the response."])
    """

    role: str  # "system" | "user" | "assistant" | "tool"
    content: str
    parts: tuple[Part, ...] = ()

    @classmethod
    def with_parts(cls, role: str, parts: Iterable[Part]) -> "Message":
        """A message of text and images in order (adjacent texts joined; no images: a plain message)."""
        merged: list[Part] = []
        for p in parts:
            if isinstance(p, str) and merged and isinstance(merged[-1], str):
                merged[-1] = merged[-1] + p
            elif not (isinstance(p, str) and not p):
                merged.append(p)
        text = "".join(p if isinstance(p, str) else p.placeholder() for p in merged)
        if all(isinstance(p, str) for p in merged):
            return cls(role, text)
        return cls(role, text, tuple(merged))

    def images(self) -> tuple["ImagePart", ...]:
        return tuple(p for p in self.parts if not isinstance(p, str))

    def key(self) -> dict[str, Any]:
        """The message as a cache key sees it: an image by its bytes' digest and resize setting, never
        its path (a message without images keeps the key it always had)."""
        d: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.parts:
            d["parts"] = [p if isinstance(p, str) else p.key() for p in self.parts]
        return d


def has_images(messages: Iterable[Message]) -> bool:
    """Whether any message carries an image."""
    return any(m.parts and m.images() for m in messages)


@dataclass(frozen=True)
class ScoreRequest:
    """One score slot to read. ``prefill`` is the assistant text that ends at the slot."""

    messages: tuple[Message, ...]
    prefill: str
    labels: tuple[str, ...]
    reasoning: bool = False  # sample free text before the score slot
    reasoning_prefix: str = "Analysis:"  # assistant text that opens the free-text part
    max_reasoning_tokens: int = 256
    temperature: float = 0.0
    seed: int | None = None
    #: header text of each further slot of a joint request (empty: one slot, the ordinary request)
    joint: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The request as its cache key sees it (``joint`` only when set, so a one-slot request keeps
        the key it always had)."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["messages"] = tuple(m.key() for m in self.messages)
        if not self.joint:
            del d["joint"]
        return d

    def slot_count(self) -> int:
        return 1 + len(self.joint)


@dataclass
class ScoreResponse:
    """The label distribution at one slot, with what it cost."""

    label_probs: dict[str, float]  # renormalised over labels; sums to 1 when label_mass > 0
    label_mass: float  # raw probability that fell on any label, in [0, 1]
    unseen_mass: float = 0.0  # probability the backend did not show (top-k cut); 0 when exact
    reasoning: str = ""  # text generated before the slot, if any
    prompt_tokens: int = 0  # prompt tokens the model actually processed for this call (the sent count where unknown)
    prompt_tokens_total: int = 0  # length of the whole prompt in tokens
    completion_tokens: int = 0
    latency_s: float = 0.0
    cached_prompt_tokens: int | None = None  # of the prompt, served from the server's cache; None: it did not say
    top_tokens: list[tuple[str, float]] = field(default_factory=list)  # what the model preferred
    system_fingerprint: str = ""  # the weights/backend identity the reply named, if any (veriscale.models.weights)
    #: a joint request's slots in order: label_probs, label_mass, unseen_mass, written (the grade text
    #: the model wrote or was given before the next header) and problem (why it is unreadable, or None)
    slots: list[dict[str, Any]] = field(default_factory=list)
    #: how the slot was read: exact, top-k, first-token or sampled (``veriscale.models.read_strategy``)
    strategy: str = ""
    prefilled: bool | None = None  # whether the score slot was prefilled (None: not said)
    samples: int = 0  # a sampled read: how many draws made label_probs (0: read from probabilities)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ScoreResponse":
        d = dict(d)
        d["top_tokens"] = [tuple(t) for t in d.get("top_tokens", [])]
        d["slots"] = [dict(x) for x in d.get("slots") or []]
        return cls(**d)


def slot_entry(label_probs: dict[str, float], label_mass: float, unseen_mass: float = 0.0,
               written: str = "", problem: str | None = None) -> dict[str, Any]:
    """One entry of ``ScoreResponse.slots``."""
    return {"label_probs": dict(label_probs), "label_mass": float(label_mass), "unseen_mass": float(unseen_mass),
            "written": written, "problem": problem}


@dataclass
class ChatResponse:
    """A chat completion: text and/or tool calls (OpenAI shape: id, name, arguments JSON)."""

    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    prompt_tokens: int = 0  # the prompt's length (sent)
    completion_tokens: int = 0
    finish_reason: str = ""
    system_fingerprint: str = ""
    cached_prompt_tokens: int | None = None  # of the prompt, served from the server's cache; None: it did not say
    stop_sequence: str | None = None  # the stop string the server says it stopped on (vLLM, SGLang); None: not said


@runtime_checkable
class ModelBackend(Protocol):
    """The contract each backend (embedded, OpenAI-compatible, two-stage) fulfils."""

    uri: str
    display_name: str
    is_embedded: bool

    def fingerprint(self) -> str:
        """A stable id of the exact model: the GGUF file hash, or the server URL + model id + what the
        server says about its weights (``veriscale.models.weights``)."""

    def score(self, request: ScoreRequest) -> ScoreResponse:
        """Probabilities of every label at the slot; raises ModelCallError on failure."""

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text`` for this model (an estimate where no tokenizer is at hand)."""

    def context_size(self) -> int | None:
        """The model's context window in tokens, if known."""

    def single_token_labels(self, labels: tuple[str, ...]) -> list[str]:
        """The labels that are NOT single tokens for this model (empty list = all fine)."""

    def chat(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
             max_tokens: int = 512, temperature: float = 0.0, seed: int | None = None) -> ChatResponse:
        """Plain chat completion (used by the two-stage reasoner, the harness and the proxies);
        ``seed`` is passed only when set, so N samples of one request differ reproducibly.
        A backend that lists more parameters in ``chat_options`` (``frozenset({"stop", "top_p"})``)
        also takes ``options={"stop": [...], ...}``; one without that attribute gets none."""

    # Optional abilities (veriscale.models.abilities): how a slot is read (``read_plan``), joint reads,
    # a server's tokenizer, ...; ``async def aclose()`` / ``def close()`` free what the backend holds (HTTP clients,
    # a loaded model); :func:`veriscale.models.abilities.aclose_backend` calls whichever a backend has.


def drive_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (its awaits are all on synchronous work) to its result.

    Lets one ``async`` implementation serve both the sync and the async API of a backend.
    """
    try:
        coro.send(None)
    except StopIteration as done:
        result: T = done.value  # the coroutine's return value
        return result
    coro.close()
    raise RuntimeError("a synchronous model call suspended")
