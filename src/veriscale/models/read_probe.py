"""Find out, once per endpoint and model, how exactly a server can read a score slot.

The probe asks a few one-token questions and keeps the best read the server really gives,
detected by behaviour, never by the server's name:

1. **prefill** (chat endpoint only): does the server continue a final assistant message? It is
   asked to go on from "The capital of France is Pa"; a continued turn writes "ris", a fresh
   turn never does. First with vLLM's and SGLang's ``continue_final_message`` and
   ``add_generation_prompt: false``, then without them (llama-server continues by itself).
   Where it does not, and the server reports its chat template (llama-server's ``/props``) and
   the URI chose no endpoint, slots are read through ``/v1/completions`` with that template.
2. **logprob_token_ids** (vLLM): the logprobs of listed token ids (every label, with and
   without its leading space, and the bare whitespace tokens). First a read of one improbable
   sentinel id (one tokenizer request): a server that ignores the field does not show it, and the
   labels are not tokenised. Kept only when the reply shows every label and the sentinel, and
   their distribution over the labels matches the plain top-k read.
3. **wide logprobs**: a logprobs count of :data:`WIDE_LOGPROBS` (llama_cpp.server's completions
   endpoint allows it); kept when the server shows more than the configured top-k and every
   label of the probe is among them.
4. otherwise **top-k** with the configured ``top_logprobs``.

It also finds what holds a joint reply to its format (one request each, in order): llama.cpp's
``grammar``, vLLM's ``structured_outputs: {"regex": ...}``, SGLang's ``regex``; kept when the
reply is what the constraint forced. A server with none scores each criterion alone: a joint
reply the server cannot hold to its format costs more than separate scoring.

A server that rejects an option answers HTTP 4xx, and the probe moves to the next one with a
note. ::

    plan = await probe_read_plan(backend, post)    # a ReadPlan; backend.read_plan() caches it
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable

from veriscale.errors import ModelCallError
from veriscale.models.base import Message
from veriscale.models.chat_template import detect_template, render_chat
from veriscale.models.logprobs import MalformedLogprobs, NoLogprobs, first_position_top, label_distribution
from veriscale.models.read_strategy import ReadKind, ReadPlan

if TYPE_CHECKING:
    from veriscale.models.openai_compat import OpenAICompatModel

Post = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]

#: the logprobs count a wide read asks for (llama_cpp.server shows about this many tokens)
WIDE_LOGPROBS = 1000
#: the chat fields of vLLM and SGLang that continue a prefilled assistant turn
CONTINUE_FIELDS: tuple[tuple[str, Any], ...] = (("continue_final_message", True), ("add_generation_prompt", False))
#: how far an exact read's label distribution may be from the top-k read's, over the labels both show
SELF_CHECK_TV = 0.01
PROBE_LABELS = tuple("ABCDE")
PROBE_MESSAGES = (Message("user", "Is 2 + 2 equal to 4? Grade the claim from A (surely true) to E (surely false). "
                                  "Reply with the letter only."),)
PROBE_PREFILL = "Grade:"
CONTINUE_MESSAGES = (Message("user", "Which city is the capital of France? Answer in one sentence."),)
CONTINUE_PREFILL = "The capital of France is Pa"
#: a token no grade slot puts weight on: in a logprob_token_ids reply only when the server honoured the list
SENTINEL_TEXT = " zebra"


def _tv(p: dict[str, float], q: dict[str, float], labels: list[str]) -> float:
    """Total variation between ``p`` and ``q`` renormalised over ``labels``."""
    sp, sq = sum(p[lab] for lab in labels), sum(q[lab] for lab in labels)
    if sp <= 0 or sq <= 0:
        return 1.0
    return 0.5 * sum(abs(p[lab] / sp - q[lab] / sq) for lab in labels)


class _Asker:
    """One probe's requests: the body of a one-token read at the probe slot, sent through ``post``."""

    def __init__(self, model: "OpenAICompatModel", post: Post, model_id: str) -> None:
        self.m, self.post, self.model_id = model, post, model_id
        self.requests = 0

    def body(self, messages: tuple[Message, ...], prefill: str, *, width: int | None,
             fields: tuple[tuple[str, Any], ...] = (), ids: list[int] | None = None) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {"model": self.model_id, "max_tokens": 1, "temperature": 0.0}
        if self.m.endpoint == "completions":
            body.update(prompt=render_chat(self.m.template, messages, prefill), logprobs=width)
            path = "/completions"
        else:
            msgs = [{"role": x.role, "content": x.content} for x in messages]
            if prefill:
                msgs.append({"role": "assistant", "content": prefill})
            body.update(messages=msgs, logprobs=True, **({"top_logprobs": width} if width is not None else {}))
            body.update(dict(fields))
            path = "/chat/completions"
        if ids is not None:
            body["logprob_token_ids"] = ids
            if self.m.endpoint == "completions":
                body["logprobs"] = len(ids)  # vLLM: logprobs, when set, must equal the ids' count
        return path, body

    async def ask(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """The reply, or None when the server refuses the request (an option it does not take)."""
        self.requests += 1
        try:
            return await self.post(path, body)
        except ModelCallError as exc:
            if exc.retryable:
                raise
            return None

    async def top(self, path: str, body: dict[str, Any]) -> list[tuple[str, float]] | None:
        data = await self.ask(path, body)
        if data is None:
            return None
        try:
            return first_position_top(data)
        except (NoLogprobs, MalformedLogprobs):
            return None


async def _continues(asker: _Asker, fields: tuple[tuple[str, Any], ...]) -> bool:
    path, body = asker.body(CONTINUE_MESSAGES, CONTINUE_PREFILL, width=5, fields=fields)
    data = await asker.ask(path, body)
    if data is None and "logprobs" in body:  # a model that refuses logprobs: ask for the text alone
        data = await asker.ask(path, {k: v for k, v in body.items() if k not in ("logprobs", "top_logprobs")})
    if data is None:
        return False
    try:
        first = max(first_position_top(data), key=lambda t: t[1])[0]
    except (NoLogprobs, MalformedLogprobs, ValueError):
        choice = (data.get("choices") or [{}])[0]
        first = str((choice.get("message") or {}).get("content") or choice.get("text") or "")
    return first.strip().lower().startswith("ris")


#: the constraints tried for joint replies, in order: the body field and a constraint that forces "zq"
JOINT_CONSTRAINTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("grammar", {"grammar": 'root ::= "zq"'}),
    ("structured_outputs", {"structured_outputs": {"regex": "zq"}}),
    ("regex", {"regex": "zq"}),
)


async def _joint_constraint(asker: _Asker, fields: tuple[tuple[str, Any], ...], notes: list[str]) -> str | None:
    """The first constraint the server really holds a reply to (it writes "zq" when told to), or None."""
    for name, extra in JOINT_CONSTRAINTS:
        path, body = asker.body(PROBE_MESSAGES, "", width=None, fields=())
        body.update(max_tokens=4, **extra)
        body.pop("logprobs", None)
        data = await asker.ask(path, body)
        choice = ((data or {}).get("choices") or [{}])[0] if isinstance(data, dict) else {}
        text = str(choice.get("text") or (choice.get("message") or {}).get("content") or "") if isinstance(choice, dict) else ""
        if text.strip() == "zq":
            return name
    notes.append("the server holds no reply to a format (no grammar, structured_outputs or regex): "
                 "joint scoring is not used, each criterion is read alone")
    return None


async def probe_read_plan(m: "OpenAICompatModel", post: Post) -> ReadPlan:
    """The best read ``m``'s server gives (see the module's text)."""
    asker = _Asker(m, post, await m._ident(post))
    notes: list[str] = []
    endpoint = m.endpoint
    prefilled, fields = True, ()
    if endpoint == "chat":
        for tried in (CONTINUE_FIELDS, ()):
            if await _continues(asker, tried):
                fields = tried
                break
        else:
            template = detect_template((await m._server_info(post)).chat_template or "")
            if template is not None and not m.endpoint_chosen:
                m.prefer_completions(template)
                endpoint = "completions"
                notes.append(f"the chat endpoint does not continue a prefilled assistant turn, and the server reports "
                             f"a {template} chat template: slots are read through /v1/completions, prefilled")
            else:
                prefilled = False
                notes.append("the chat endpoint does not continue a prefilled assistant turn: readings are first-token")
    prefill = PROBE_PREFILL if prefilled else ""

    joint: str | None = None

    def done(kind: ReadKind, method: str, width: int | None) -> ReadPlan:
        return ReadPlan(kind, prefilled, endpoint, method, width, fields,
                        tuple(notes) + (f"probe: {asker.requests} requests",), joint)

    if m.sample:  # asked to sample: no logprobs needed (the model may give none)
        return done(ReadKind.SAMPLED, "sample", m.sample)
    if m.grammar is None:
        joint = await _joint_constraint(asker, fields, notes)
    elif m.grammar:
        joint = "grammar"  # the URI says so (?grammar=on)
    else:
        notes.append("?grammar=off: joint scoring is not used, each criterion is read alone")

    path, body = asker.body(PROBE_MESSAGES, prefill, width=m.top_logprobs, fields=fields)
    baseline = await asker.top(path, body)
    if baseline is None:  # chat still works; each score call will say what is missing
        notes.append("the server gave no logprobs at the probe's score slot: score calls will fail "
                     "(use ?sample=N, or two-stage scoring)")
        return done(ReadKind.TOP_K, "top-logprobs", m.top_logprobs)
    if m.read == "top-k":  # the URI asks for the plain top-k read
        return done(ReadKind.TOP_K, "top-logprobs", m.top_logprobs)
    base_probs, _, _ = label_distribution(baseline, PROBE_LABELS)
    seen = [lab for lab in PROBE_LABELS if any(t.strip() == lab for t, _ in baseline)]

    sentinel = await m.sentinel_token_id(post)  # first a one-id read: does the server honour the list at all?
    ids = None
    if sentinel is not None:
        path, body = asker.body(PROBE_MESSAGES, prefill, width=None if endpoint == "chat" else 1, fields=fields,
                                ids=[sentinel])
        got = await asker.top(path, body)
        if got is None:
            notes.append("the server does not take logprob_token_ids")
        elif not any(t == SENTINEL_TEXT for t, _ in got):
            notes.append("the server ignores logprob_token_ids")
        else:
            ids = await m.slot_token_ids(PROBE_LABELS, post)
    if ids:
        path, body = asker.body(PROBE_MESSAGES, prefill, width=None if endpoint == "chat" else len(ids),
                                fields=fields, ids=ids)
        got = await asker.top(path, body)
        if got is None:
            notes.append("the server does not take logprob_token_ids for the labels")
        elif any(t == SENTINEL_TEXT for t, _ in got) and all(any(t.strip() == lab for t, _ in got) for lab in PROBE_LABELS):
            probs, _, _ = label_distribution(got, PROBE_LABELS)
            if _tv(probs, base_probs, seen) <= SELF_CHECK_TV:
                return done(ReadKind.EXACT, "logprob_token_ids", None)
            notes.append("logprob_token_ids gave another label distribution than the top-k read: not used")
        else:
            notes.append("logprob_token_ids did not show every label: not used")

    path, body = asker.body(PROBE_MESSAGES, prefill, width=WIDE_LOGPROBS, fields=fields)
    wide = await asker.top(path, body)
    if wide is not None and len(wide) > m.top_logprobs and all(any(t.strip() == lab for t, _ in wide) for lab in PROBE_LABELS):
        probs, _, _ = label_distribution(wide, PROBE_LABELS)
        if _tv(probs, base_probs, seen) <= SELF_CHECK_TV:
            return done(ReadKind.EXACT, "wide-logprobs", WIDE_LOGPROBS)
        notes.append("the wide logprobs read gave another label distribution than the top-k read: not used")
    elif wide is None:
        notes.append(f"the server refuses {WIDE_LOGPROBS} logprobs")
    else:
        notes.append(f"the server shows at most {len(wide)} logprobs")
    return done(ReadKind.TOP_K, "top-logprobs", m.top_logprobs)
