"""``veriscale serve-reward``: the verifier as a remote reward model (OpenRLHF ``--remote_rm_url``).

    veriscale serve-reward --port 5000 --model http://127.0.0.1:8000/v1#judge
    # openrlhf ... --remote_rm_url http://127.0.0.1:5000/get_reward

It binds 127.0.0.1 by default; any other address needs ``--token`` (or
``$VERISCALE_REWARD_TOKEN``), which clients send as ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import ipaddress
import os
from typing import Annotated, Optional

import typer

from veriscale.cli import options as o
from veriscale.cli.common import err_console, user_errors
from veriscale.errors import UserError

TOKEN_ENV = "VERISCALE_REWARD_TOKEN"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def register(app: typer.Typer) -> None:
    @app.command("serve-reward")
    def serve_reward(
        host: Annotated[str, typer.Option("--host", help="Address to bind (default loopback only).")] = "127.0.0.1",
        port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 5000,
        token: Annotated[Optional[str], typer.Option("--token", help=f"Bearer token clients must send (default ${TOKEN_ENV}); required off loopback.")] = None,
        max_body: Annotated[str, typer.Option("--max-body", help="Largest request body, e.g. 8M.")] = "8M",
        model: o.ModelOpt = None, store: o.StoreOpt = None, scale: o.ScaleOpt = "letters",
        criteria: o.CriteriaOpt = "general", repeats: o.RepeatsOpt = None,
        concurrency: o.ConcurrencyOpt = None, max_calls: o.MaxCallsOpt = None,
    ) -> None:
        """Answer POST /get_reward with group-relative verifier rewards (OpenRLHF's remote reward shape).

        Example: veriscale serve-reward --port 5000 --model http://127.0.0.1:8000/v1#judge
        """
        with user_errors():
            from veriscale.sizes import parse_size

            token = token or os.environ.get(TOKEN_ENV) or None
            if not is_loopback(host) and not token:
                raise UserError(f"--host {host} is reachable from other machines: set --token (or ${TOKEN_ENV}) "
                                "so only your trainer can ask for rewards, or bind 127.0.0.1")
            limit = parse_size(max_body)
            try:
                import uvicorn

                from veriscale.rewards.server import create_reward_app
            except ImportError:
                raise UserError("serve-reward needs FastAPI and uvicorn: pip install 'veriscale[server]'") from None
            from veriscale.rewards.batch import BatchRewarder
            from veriscale.rewards.service import RewardService
            from veriscale.verify.reward import Verifier

            c = o.concurrency_of(concurrency)
            verifier = Verifier(o.open_model(model, concurrency=c), store=o.open_store(store), scale=scale,
                                criteria=criteria, repeats=repeats, max_calls=max_calls, concurrency=c)
            app_ = create_reward_app(RewardService(BatchRewarder(verifier)), token=token, max_body_bytes=limit)
            err_console.print(f"reward server on http://{host}:{port}/get_reward"
                              + (" (token required)" if token else ""), highlight=False)
        uvicorn.run(app_, host=host, port=port, log_level="warning")
