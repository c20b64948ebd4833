"""``veriscale serve``: the dashboard and the REST API, over the store and the gateway.

    veriscale serve                                   # http://127.0.0.1:8765, the default store
    veriscale serve --allow-dir ~/agent-runs --model http://127.0.0.1:8000/v1#judge
    VERISCALE_TOKEN=s3cret veriscale serve --host 0.0.0.0   # off loopback a token is required

Jobs submitted to it run on ``--model`` and may read only the store and files under the
``--allow-dir`` folders; a job left unfinished when the server stopped resumes when it starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List, Optional

import typer

from veriscale.cli import options as o
from veriscale.cli.common import err_console, info, user_errors
from veriscale.errors import UserError


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve(
        host: Annotated[Optional[str], typer.Option("--host", help="Address to bind (default 127.0.0.1, loopback only).")] = None,
        port: Annotated[Optional[int], typer.Option("--port", help="Port to listen on (default 8765).")] = None,
        token: Annotated[Optional[str], typer.Option("--token", help="Token clients send as 'Authorization: Bearer' or 'x-api-key' (default $VERISCALE_TOKEN); required off loopback.")] = None,
        allow_dir: Annotated[Optional[List[Path]], typer.Option("--allow-dir", help="A folder jobs may read (repeatable); nothing else but the store is read.")] = None,
        max_body: Annotated[Optional[str], typer.Option("--max-body", help="Largest request body, e.g. 1M (bigger: 413).")] = None,
        workers: Annotated[Optional[int], typer.Option("--workers", help="Jobs that run at once (default 1).")] = None,
        proxy_n: Annotated[Optional[int], typer.Option("--proxy-n", help="Serve the proxy APIs (/v1/chat/completions, /v1/responses, /v1/messages) with N candidates of --model, unless \\[proxy] in the config file names its candidates.")] = None,
        proxy_schedule: Annotated[Optional[str], typer.Option("--proxy-schedule", help="How the proxy picks: early, round_robin or auto (early when --joint is on and N > 3; config proxy.schedule; $VERISCALE_PROXY_SCHEDULE).")] = None,
        proxy_aliases: Annotated[Optional[str], typer.Option("--proxy-aliases", help="Model names the proxy answers, each with its candidate pool: 'fast=MODEL*2; best=MODEL*3, MODEL2*1' (config proxy.aliases table; $VERISCALE_PROXY_ALIASES). Unset: every name goes to the one pool.")] = None,
        proxy_budget: Annotated[Optional[str], typer.Option("--proxy-budget", help="What the proxy's pick may spend per request: calls=N or tokens=N of verifier calls, cache hits free (config proxy.budget; $VERISCALE_PROXY_BUDGET). The pick chooses the schedule and criteria it affords; too small for one comparison is refused at start.")] = None,
        model: o.ModelOpt = None, store: o.StoreOpt = None, concurrency: o.ConcurrencyOpt = None,
        redact: o.RedactOpt = None, no_redact: o.NoRedactOpt = False,
    ) -> None:
        """Serve the dashboard and the REST API (jobs, runs, calls, live progress).

        Example: veriscale serve --allow-dir ~/agent-runs
        """
        with user_errors():
            from veriscale.cli.settings import current
            from veriscale.server.settings import server_settings

            settings = server_settings(current().config, host=host, port=port, token=token, allow_dirs=allow_dir,
                                       max_body=max_body, workers=workers,
                                       redactor=o.output_redactor(redact, no_redact))
            try:
                import uvicorn

                from veriscale.server.app import create_app
            except ImportError:
                raise UserError("serve needs FastAPI and uvicorn: pip install 'veriscale[server]'") from None
            from veriscale.server.jobs import JobRunner
            from veriscale.server.security import AccessPolicy

            cs = o.command_settings(model, store, concurrency)
            st = o.open_store(cs)
            c = cs.concurrency
            injection = {**cs.injection(), "injection_policy": cs.injection_policy}  # as select's
            runner = JobRunner(st, o.open_model(cs), roots=settings.allow_dirs,
                               workers=settings.workers, concurrency=c, injection=injection)
            policy = AccessPolicy.for_bind(settings.host, settings.port, token=settings.token,
                                           max_body_bytes=settings.max_body_bytes)
            proxy = _proxy(current().with_flags(proxy_schedule=proxy_schedule, proxy_aliases=proxy_aliases,
                                                proxy_budget=proxy_budget), runner.model, st, proxy_n, injection)
            from veriscale.engine.prices import price_table

            app_ = create_app(st, runner, policy, roots=settings.allow_dirs, proxy=proxy, redactor=settings.redactor,
                              prices=price_table(current()))
            resumed = runner.start()
            shown = f"[{settings.host}]" if ":" in settings.host else settings.host
            info(f"veriscale dashboard on http://{shown}:{settings.port}/ (store {st.path})", highlight=False)
            if settings.token:
                err_console.print("a token is required: send it as 'Authorization: Bearer <token>' or 'x-api-key', "
                                  f"or open http://{shown}:{settings.port}/?token=<token> once in the browser",
                                  highlight=False)
            if not settings.loopback:
                err_console.print(f"bound to {settings.host}: reachable from other machines (token required)",
                                  highlight=False)
            roots = ", ".join(str(r) for r in settings.allow_dirs) or "none (jobs can read only the store)"
            info(f"jobs may read: {roots}", highlight=False)
            if not settings.redactor.enabled:
                err_console.print("secrets are NOT redacted (--no-redact / redact.enabled = false): every answer "
                                  "shows the store's raw text; use this only for local debugging", highlight=False)
            if proxy is not None:
                pools = ", ".join(f"{n} × {name}" for name, n in proxy.settings.candidates)
                info(f"proxy on /v1/chat/completions, /v1/responses, /v1/messages: {pools}; verifier "
                     f"{proxy.verifier_model.uri}", highlight=False)
            if resumed:
                info(f"resuming {resumed} unfinished job(s) from the store", highlight=False)
        try:
            uvicorn.run(app_, host=settings.host, port=settings.port, log_level="warning")
        finally:
            runner.stop()


def _proxy(resolved, server_model, store, proxy_n: Optional[int], injection=None):
    """The proxy service when ``[proxy]`` or ``--proxy-n`` asks for one, checked at start;
    ``resolved``: the settings with serve's proxy flags over them."""
    from veriscale.proxy.settings import proxy_settings

    settings = proxy_settings(resolved, fallback_model=server_model.uri, n=proxy_n, injection=injection)
    if settings is None:
        return None
    from veriscale.models.uri import load_backend
    from veriscale.proxy.setup import open_proxy

    def load(uri: str):  # the server's own model is not loaded twice
        return server_model if uri == server_model.uri else load_backend(uri)

    return open_proxy(settings, server_model, store, load=load)
