"""``veriscale serve-reward``: the verifier as a remote reward model (OpenRLHF ``--remote_rm_url``).

    veriscale serve-reward --port 5000 --model http://127.0.0.1:8000/v1#judge --group-size 8
    # openrlhf ... --n_samples_per_prompt 8 --remote_rm_url http://127.0.0.1:5000/get_reward

It binds 127.0.0.1 by default; any other address needs ``--token`` (or
``$VERISCALE_REWARD_TOKEN``), which clients send as ``Authorization: Bearer <token>`` or, as
OpenRLHF must (its client sends no headers), in the URL: ``/get_reward?token=<token>``.
``--answer-within 150`` answers each request within 150 s (below OpenRLHF's fixed 180 s client
timeout); ``--length-control residual`` takes the reward–length slope out of ranked rewards.
SIGTERM rewards the groups still filling, answers their requests, then exits.

``--ray [--replicas N] [--address ADDR]`` rewards the groups on N Ray actors, each with its own
verifier from the same model and settings, the endpoint's ``--concurrency`` held across all of them
(:mod:`veriscale.rewards.ray_pool`); without ``--address`` a local Ray instance starts.
"""

from __future__ import annotations

import importlib
from typing import Annotated, Any, Optional

import typer

from veriscale.settings import environment
from veriscale.cli import options as o
from veriscale.cli.common import info, user_errors
from veriscale.errors import UserError
from veriscale.server.security import is_loopback

TOKEN_ENV = "VERISCALE_REWARD_TOKEN"


def register(app: typer.Typer) -> None:
    @app.command("serve-reward")
    def serve_reward(
        host: Annotated[str, typer.Option("--host", help="Address to bind (default loopback only).")] = "127.0.0.1",
        port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 5000,
        token: Annotated[Optional[str], typer.Option("--token", help=f"Bearer token clients must send (default ${TOKEN_ENV}); required off loopback.")] = None,
        max_body: Annotated[str, typer.Option("--max-body", help="Largest request body, e.g. 8M.")] = "8M",
        group_size: Annotated[Optional[int], typer.Option("--group-size", help="Completions per prompt to wait for before rewarding them as one group (OpenRLHF's --n_samples_per_prompt).")] = None,
        group_wait: Annotated[float, typer.Option("--group-wait", help="Seconds to wait for a group to fill before rewarding what arrived.")] = 30.0,
        mode: Annotated[str, typer.Option("--mode", help="group: rank a prompt's completions against each other; pointwise: score each alone.")] = "group",
        group_scheme: Annotated[Optional[str], typer.Option("--group-scheme", help="How a group is ranked: round_robin (every pair) or sparse (at most 3n comparisons); config rewards.group_scheme, $VERISCALE_REWARD_GROUP_SCHEME.")] = None,
        answer_within: Annotated[Optional[float], typer.Option("--answer-within", help="Answer every request within this many seconds (0: no limit): a group waits at most half of it, a request still waiting then gets the neutral value flagged late. Set it below the trainer client's timeout (OpenRLHF: 180 s); config rewards.answer_within, $VERISCALE_REWARD_ANSWER_WITHIN.")] = None,
        length_control: Annotated[Optional[str], typer.Option("--length-control", help="off, or residual: take the within-group reward-length slope out of ranked rewards; config rewards.length_control, $VERISCALE_REWARD_LENGTH_CONTROL.")] = None,
        on_failure: Annotated[str, typer.Option("--on-failure", help="A query that could not be verified gets: neutral (its group's mean verified reward, flagged in extra_logs; OpenRLHF cannot take null) or null.")] = "neutral",
        model: o.ModelOpt = None, store: o.StoreOpt = None, scale: o.ScaleOpt = "letters",
        criteria: o.CriteriaOpt = "general", repeats: o.RepeatsOpt = None,
        concurrency: o.ConcurrencyOpt = None, max_calls: o.MaxCallsOpt = None,
        on_ray: Annotated[bool, typer.Option("--ray", help="Reward on a pool of Ray actors, each with its own verifier (pip install 'veriscale\\[ray]').")] = False,
        replicas: Annotated[int, typer.Option("--replicas", help="With --ray: how many verifier actors (the endpoint's --concurrency holds across them all).")] = 2,
        address: Annotated[Optional[str], typer.Option("--address", help="With --ray: the Ray cluster to join (HOST:PORT, ray://HOST:PORT or auto; default: a local Ray instance).")] = None,
    ) -> None:
        """Answer POST /get_reward with group-relative verifier rewards (OpenRLHF's remote reward shape).

        Example: veriscale serve-reward --port 5000 --model http://127.0.0.1:8000/v1#judge
        """
        with user_errors():
            from veriscale.sizes import parse_size

            token = token or environment(TOKEN_ENV)  # the settings layer's one environment reader
            if not is_loopback(host) and not token:
                raise UserError(f"--host {host} is reachable from other machines: set --token (or ${TOKEN_ENV}) "
                                "so only your trainer can ask for rewards, or bind 127.0.0.1")
            limit = parse_size(max_body)
            from veriscale.rewards.batch import MODES
            from veriscale.rewards.batch_rewards import ON_FAILURE

            if mode not in MODES:
                raise UserError(f"--mode {mode} is unknown: use one of {', '.join(MODES)}")
            if on_failure not in ON_FAILURE:
                raise UserError(f"--on-failure {on_failure} is unknown: use one of {', '.join(ON_FAILURE)}")
            if group_size is not None and group_size < 1 or group_wait <= 0:
                raise UserError("--group-size must be 1 or more and --group-wait above 0 seconds")
            if not on_ray and (address is not None or replicas != 2):
                raise UserError("--address and --replicas place the Ray replicas: add --ray")
            if replicas < 1:
                raise UserError(f"--replicas {replicas} is below 1: give the number of Ray reward replicas")
            if on_ray:  # an address nobody answers at: one sentence, before the model loads
                from veriscale.rewards.ray_pool import join_cluster

                join_cluster(address)
            try:
                importlib.import_module("uvicorn")  # serve() runs it

                from veriscale.rewards.server import create_reward_app, serve
            except ImportError:
                raise UserError("serve-reward needs FastAPI and uvicorn: pip install 'veriscale[server]'") from None
            from veriscale.rewards.batch import BatchRewarder
            from veriscale.rewards.batch_rewards import RewardService
            from veriscale.verify.reward import Verifier

            cs = o.command_settings(model, store, concurrency).with_flags(
                reward_group_scheme=group_scheme, reward_answer_within=answer_within,
                reward_length_control=length_control)
            c = cs.concurrency
            verifier = Verifier(o.open_model(cs), store=o.open_store(cs), scale=scale,
                                criteria=criteria, repeats=repeats, max_calls=max_calls, concurrency=c)
            rewarder: Any = BatchRewarder(verifier, mode=mode, scheme=cs.reward_group_scheme,
                                          length_control=cs.reward_length_control)
            if on_ray:
                from veriscale.rewards.ray_pool import PoolRewarder, reward_pool

                rewarder = PoolRewarder(reward_pool(replicas, rewarder=rewarder, name=None, detached=False))
            service = RewardService(rewarder, on_failure=on_failure)
            within = cs.reward_answer_within or None
            app_ = create_reward_app(service, token=token, max_body_bytes=limit, group_size=group_size,
                                     group_wait_s=group_wait, answer_within_s=within)
            grouping = (f", groups of {group_size} (wait up to {app_.state.batcher.wait_s:g} s)" if group_size else "")
            grouping += f", groups ranked by {cs.reward_group_scheme}" if mode == "group" else ""
            grouping += f", answers within {within:g} s" if within else ""
            grouping += ", length-controlled" if cs.reward_length_control != "off" else ""
            grouping += f", on {replicas} Ray replica{'s' * (replicas != 1)}" if on_ray else ""
            info(f"reward server on http://{host}:{port}/get_reward ({mode} rewards{grouping})"
                 + (" (token required)" if token else ""), highlight=False)
        serve(app_, host=host, port=port)
