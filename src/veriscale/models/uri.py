"""Pick a backend from one string.

    load_backend("embedded")                               # SmolLM2-135M, in process (default)
    load_backend("embedded:/models/qwen.gguf")             # another GGUF file, in process
    load_backend("http://127.0.0.1:8000/v1#Qwen/Qwen3-8B") # any OpenAI-compatible server
    load_backend("http://127.0.0.1:8000/v1?template=chatml#m")  # /v1/completions + prefill
    load_backend("openai:gpt-4.1-mini")                    # api.openai.com, OPENAI_API_KEY
    load_backend("twostage:openai:gpt-4.1+embedded")       # reasoner + logprob scorer

Query options for HTTP URIs: template (chatml|llama3|gemma), top_logprobs (default 20),
timeout (s), retries, concurrency.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit, urlunsplit

from veriscale.errors import UserError
from veriscale.models.base import ModelBackend

URI_FORMS = "embedded, embedded:<file.gguf>, http://host:port/v1#model, openai:<model>, twostage:<reasoner>+<scorer>"
_SPLIT_TWOSTAGE = re.compile(r"\+(?=embedded|https?://|openai:|twostage:)")


def _int_opt(opts: dict[str, list[str]], name: str, default: int, uri: str) -> int:
    raw = opts.get(name, [str(default)])[0]
    try:
        return int(float(raw))
    except ValueError:
        raise UserError(f"option {name}={raw} in model URI '{uri}' is not a number: give e.g. {name}={default}") from None


def load_backend(uri: str) -> ModelBackend:
    """The backend a model URI names; an unknown form raises a UserError listing the forms."""
    uri = (uri or "").strip()
    if uri == "embedded":
        from veriscale.models.embedded import EmbeddedModel

        return EmbeddedModel.load()
    if uri.startswith("embedded:"):
        from veriscale.models.embedded import EmbeddedModel

        return EmbeddedModel.load(Path(uri.split(":", 1)[1]))
    if uri.startswith("twostage:"):
        parts = _SPLIT_TWOSTAGE.split(uri[len("twostage:"):], maxsplit=1)
        if len(parts) != 2:
            raise UserError(f"two-stage URI '{uri}' needs a reasoner and a scorer: write twostage:<reasoner-uri>+<scorer-uri>")
        from veriscale.models.twostage import TwoStageModel

        return TwoStageModel(load_backend(parts[0]), load_backend(parts[1]), uri=uri)
    if uri.startswith("openai:"):
        model = uri.split(":", 1)[1]
        if not os.environ.get("OPENAI_API_KEY"):
            raise UserError("openai: models need an API key: export OPENAI_API_KEY=... (or point --model at a local server)")
        from veriscale.models.openai_compat import OpenAICompatModel

        base = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1")
        return OpenAICompatModel(base, model=model, api_key=os.environ["OPENAI_API_KEY"], uri=uri)
    if uri.startswith(("http://", "https://")):
        parts = urlsplit(uri)
        opts = parse_qs(parts.query)
        base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
        from veriscale.models.openai_compat import OpenAICompatModel

        return OpenAICompatModel(
            base, model=parts.fragment or None, template=opts.get("template", [None])[0],
            top_logprobs=_int_opt(opts, "top_logprobs", 20, uri),
            timeout_s=_int_opt(opts, "timeout", 120, uri), max_retries=_int_opt(opts, "retries", 4, uri),
            concurrency=_int_opt(opts, "concurrency", 8, uri), uri=uri,
        )
    raise UserError(f"unknown model URI '{uri}': use one of {URI_FORMS}")
