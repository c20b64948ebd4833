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
4. **equal bias** (:func:`equal_bias_check`): the same ``logit_bias`` of :data:`EQUAL_BIAS` on
   every label token (each label alone and after a space, and the bare space and newline, the
   tokens a ``logprob_token_ids`` read asks for; their ids from the server's tokenizer). Adding
   one constant to every logit of a set leaves the distribution within the set as it was and
   brings the set into the top k, where the server reports logprobs after the bias (vLLM with
   ``--logprobs-mode processed_logprobs``; llama.cpp reports them before it). Kept when a token
   outside the set lost about the bias in logprob (the server reports post-bias values), the
   biased reply shows every label, and its label distribution matches the plain top-k read.
   A reply is read back to the unbiased scale by :func:`unbiased_top` (the label mass it gives
   is an upper bound: the non-label tokens beyond the top k are not seen).
5. otherwise **top-k** with the configured ``top_logprobs``.

It also finds what holds a joint reply to its format (one request each, in order): llama.cpp's
``grammar``, vLLM's ``structured_outputs: {"regex": ...}``, SGLang's ``regex``; kept when the
reply is what the constraint forced. A server with none scores each criterion alone: a joint
reply the server cannot hold to its format costs more than separate scoring.

A server that rejects an option answers HTTP 4xx, and the probe moves to the next one with a
note. ::

    plan = await probe_read_plan(backend, post)    # a ReadPlan; backend.read_plan() caches it
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol

from veriscale.errors import ModelCallError
from veriscale.models.base import Message
from veriscale.models.chat_template import detect_template, render_chat
from veriscale.models.logprobs import MalformedLogprobs, NoLogprobs, first_position_top, label_distribution
from veriscale.models.read_strategy import EQUAL_BIAS, EQUAL_BIAS_METHOD, ReadKind, ReadPlan

if TYPE_CHECKING:
    import httpx

    from veriscale.models.server_info import ServerInfo

#: a JSON POST to the server (path under its base URL, body) that answers the reply's JSON
Post = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
#: a tokenizer POST (full URL, body) that answers the raw response (no retries)
Probe = Callable[[str, dict[str, Any]], Awaitable["httpx.Response"]]


class ProbedBackend(Protocol):
    """What the probe reads and asks of an OpenAI-compatible backend
    (``veriscale.models.openai_compat.OpenAICompatModel`` is one)."""

    base_url: str
    endpoint: str
    endpoint_chosen: bool
    template: str | None
    top_logprobs: int
    grammar: bool | None
    sample: int | None
    read: str

    async def _sync_post(self, path: str, body: dict[str, Any]) -> dict[str, Any]: ...

    async def _sync_probe(self, url: str, body: dict[str, Any]) -> httpx.Response: ...

    async def _aprobe(self, url: str, body: dict[str, Any]) -> httpx.Response: ...

    async def slot_token_ids(self, labels: tuple[str, ...], post: Post) -> list[int] | None: ...

    async def sentinel_token_id(self, post: Post) -> int | None: ...

    async def _tokenize(self, root: str, text: str, probe: Probe) -> list[int] | None: ...

    async def _ident(self, post: Post) -> str: ...

    async def _server_info(self, post: Post) -> ServerInfo: ...

    def prefer_completions(self, template: str) -> None: ...

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
#: how much a token outside the biased set must lose in logprob (nats) for the server to count as
#: reporting post-bias logprobs: exactly EQUAL_BIAS + log(label mass) there, 0 on a pre-bias server
POST_BIAS_DROP = 1.0


def bias_texts(labels: tuple[str, ...]) -> list[str]:
    """What an equal-bias read raises: each label alone and after a space, and the bare whitespace
    tokens a grade may follow (so the whitespace path keeps its weight against the labels)."""
    return [*labels, *(" " + lab for lab in labels), " ", "\n"]


async def bias_tokens(m: ProbedBackend, labels: tuple[str, ...], post: Post) -> dict[str, int] | None:
    """Each text of :func:`bias_texts` that is one token, with its id, from the server's tokenizer (the
    path the ``logprob_token_ids`` read takes; each text asked once per server, then remembered); None
    when the server has no tokenizer endpoint."""
    probe = m._sync_probe if post == m._sync_post else m._aprobe
    root = m.base_url[:-3] if m.base_url.endswith("/v1") else m.base_url
    out: dict[str, int] = {}
    for text in bias_texts(labels):
        got = await m._tokenize(root, text, probe)
        if got is None:
            return None
        if len(got) == 1:
            out[text] = got[0]
    return out


def logit_bias(tokens: dict[str, int]) -> dict[str, float]:
    """The request's ``logit_bias``: every token of the set raised by the same EQUAL_BIAS."""
    return {str(i): EQUAL_BIAS for i in sorted(set(tokens.values()))}


def unbiased_top(top: list[tuple[str, float]], biased: set[str]) -> list[tuple[str, float]]:
    """An equal-bias reply's (token, probability) pairs on the unbiased scale: the biased tokens'
    probabilities divided by e^EQUAL_BIAS, then all shown pairs renormalised by the unbiased mass
    they carry. The ratios within the biased set are the weights' own (what makes the read exact);
    the scale is an upper bound, since the unbiased tokens beyond the top k are not seen (with none
    shown, the biased set is taken to carry all the mass)."""
    shift = math.exp(-EQUAL_BIAS)
    inside = sum(p for t, p in top if t in biased)
    outside = sum(p for t, p in top if t not in biased)
    total = inside * shift + outside
    if total <= 0:
        return list(top)
    return [(t, (p * shift if t in biased else p) / total) for t, p in top]


def _tv(p: dict[str, float], q: dict[str, float], labels: list[str]) -> float:
    """Total variation between ``p`` and ``q`` renormalised over ``labels``."""
    sp, sq = sum(p[lab] for lab in labels), sum(q[lab] for lab in labels)
    if sp <= 0 or sq <= 0:
        return 1.0
    return 0.5 * sum(abs(p[lab] / sp - q[lab] / sq) for lab in labels)


class _Asker:
    """One probe's requests: the body of a one-token read at the probe slot, sent through ``post``."""

    def __init__(self, model: ProbedBackend, post: Post, model_id: str) -> None:
        self.m, self.post, self.model_id = model, post, model_id
        self.requests = 0

    def body(self, messages: tuple[Message, ...], prefill: str, *, width: int | None,
             fields: tuple[tuple[str, Any], ...] = (), ids: list[int] | None = None,
             bias: dict[str, float] | None = None) -> tuple[str, dict[str, Any]]:
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
        if bias:
            body["logit_bias"] = bias
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


async def probe_read_plan(m: ProbedBackend, post: Post) -> ReadPlan:
    """The best read ``m``'s server gives (see the module's text)."""
    asker = _Asker(m, post, await m._ident(post))
    notes: list[str] = []
    endpoint = m.endpoint
    prefilled = True
    fields: tuple[tuple[str, Any], ...] = ()
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

    if await equal_bias_check(asker, prefill, fields, baseline, notes):
        return done(ReadKind.EXACT, EQUAL_BIAS_METHOD, m.top_logprobs)
    return done(ReadKind.TOP_K, "top-logprobs", m.top_logprobs)


async def equal_bias_check(asker: _Asker, prefill: str, fields: tuple[tuple[str, Any], ...],
                           baseline: list[tuple[str, float]], notes: list[str]) -> bool:
    """Whether an equal ``logit_bias`` on the label tokens reads the probe slot exactly (one tokenizer
    request a text, then one biased request); says why not in ``notes``."""
    m = asker.m
    tokens = await bias_tokens(m, PROBE_LABELS, asker.post)
    if tokens is None:
        notes.append("logit_bias: the server has no tokenizer endpoint, so the label tokens' ids are unknown: not tried")
        return False
    if not all(lab in tokens or " " + lab in tokens for lab in PROBE_LABELS):
        notes.append("logit_bias: some probe label is no single token: not tried")
        return False
    path, body = asker.body(PROBE_MESSAGES, prefill, width=m.top_logprobs, fields=fields, bias=logit_bias(tokens))
    got = await asker.top(path, body)
    if got is None:
        notes.append("logit_bias: the server refuses it (or gives no logprobs with it)")
        return False
    biased = set(tokens)
    plain = dict(baseline)
    drops = [math.log(plain[t]) - math.log(p) for t, p in got if t not in biased and t in plain and p > 0 and plain[t] > 0]
    if not drops:
        notes.append("logit_bias: no token outside the labels shows in both the plain and the biased reply, so "
                     "whether the server reports logprobs after the bias cannot be told: not used")
        return False
    if max(drops) < POST_BIAS_DROP:
        notes.append(f"logit_bias: the server reports logprobs before the bias (a +{EQUAL_BIAS:g} bias on the labels "
                     "left the other tokens' logprobs as they were; llama.cpp does so), so it cannot bring unseen "
                     "labels into view: not used")
        return False
    if not all(any(t.strip() == lab for t, _ in got) for lab in PROBE_LABELS):
        notes.append("logit_bias: the biased reply did not show every label in its top "
                     f"{m.top_logprobs}: not used")
        return False
    probs, _, _ = label_distribution(got, PROBE_LABELS)
    base_probs, _, _ = label_distribution(baseline, PROBE_LABELS)
    seen = [lab for lab in PROBE_LABELS if any(t.strip() == lab for t, _ in baseline)]
    if seen and _tv(probs, base_probs, seen) > SELF_CHECK_TV:
        notes.append("logit_bias: the biased read gave another label distribution than the top-k read: not used")
        return False
    return True


async def probe_equal_bias(m: ProbedBackend, post: Post) -> tuple[bool, list[str]]:
    """The equal-bias question alone, at the prefilled probe slot of ``m``'s endpoint (its plain top-k
    read, then the biased one): whether it holds and the probe's notes (for a check of one server)."""
    asker = _Asker(m, post, await m._ident(post))
    path, body = asker.body(PROBE_MESSAGES, PROBE_PREFILL, width=m.top_logprobs)
    baseline = await asker.top(path, body)
    if baseline is None:
        return False, ["the server gave no logprobs at the probe's score slot"]
    notes: list[str] = []
    return await equal_bias_check(asker, PROBE_PREFILL, (), baseline, notes), notes
