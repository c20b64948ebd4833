"""Pick a backend from one string.

    load_backend("embedded")                               # SmolLM2-135M, in process (default)
    load_backend("embedded:/models/qwen.gguf")             # another GGUF file, in process
    load_backend("http://127.0.0.1:8000/v1#Qwen/Qwen3-8B") # any OpenAI-compatible server
    load_backend("http://127.0.0.1:8000/v1?template=chatml#m")  # /v1/completions + prefill
    load_backend("openai:gpt-4.1-mini")                    # api.openai.com, OPENAI_API_KEY
    load_backend("twostage:openai:gpt-4.1+embedded")       # reasoner + logprob scorer

Query options for HTTP URIs: template (chatml|llama3|gemma), top_logprobs (default 20),
timeout (s), retries, concurrency.

Embedded options: threads (CPU threads, default every core), context (n_ctx), e.g.
``embedded?threads=2``. HTTP options also: endpoint (chat|completions), context (the window,
where the server does not report it).

The scheme (text before the first ``:``) picks a parse function registered in
``veriscale.models.registry``; the built-in ones live in ``veriscale.models.schemes``, others
come from installed plugins (entry point group ``veriscale.backends``).
"""

from __future__ import annotations

import veriscale.models.schemes  # noqa: F401  (registers the built-in schemes)
from veriscale.models.registry import check_scheme, load_backend, uri_forms

__all__ = ["URI_FORMS", "check_scheme", "load_backend"]

URI_FORMS = uri_forms()  # the built-in forms, for --help; errors list every registered form
