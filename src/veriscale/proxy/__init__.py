"""Best-of-N in front of coding agents: three proxy APIs on the ``veriscale serve`` app.

An agent (Claude Code, Codex, anything speaking OpenAI Chat Completions) points its base URL
at the server; each request fans out to N upstream candidates, and the agent gets the one the
verifier picks (or the common answer when they agree). Modules: ``settings`` (the ``[proxy]``
table), ``conversation`` (the one internal shape), ``candidates`` (fan-out, agreement),
``service`` (one request: pick, record, track), ``streaming`` (keep-alive until the pick),
one module a front API (``openai_chat``, ``responses``, ``anthropic``), ``setup`` (built and
checked at start) and ``routes``. See docs/SERVER.md.
"""
