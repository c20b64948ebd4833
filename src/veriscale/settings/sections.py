"""Settings one part of veriscale reads on its own (the server, the reward adapters, the proxy), each
part a section of :class:`~veriscale.settings.registry.Spec` entries resolved by the same rule as the
global ones (flag > environment > file > default, :func:`veriscale.settings.resolve.resolve_specs`)::

    section(SERVER, load_config(None), {"host": "0.0.0.0"})
    # {'host': '0.0.0.0', 'port': 8765, 'token': None, ...}   ($VERISCALE_TOKEN, [server] token)

A section's settings are not global flags: only its command takes their flags (``serve --port``), so
they stay out of :data:`~veriscale.settings.registry.SPECS` and the every-command reach check. The
typed records built from them live with their part (``veriscale.server.settings.ServerSettings``,
``veriscale.proxy.settings.ProxySettings``), which also check what only the part can (a folder
exists, a port is a port). Each spec's name is ``<section>_<key>``; :func:`section` gives the keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from veriscale.settings.registry import Spec, _no_env, _number, _whole

if TYPE_CHECKING:
    from veriscale.config import Config


def _text(raw: str) -> str:
    return raw.strip()


#: ``veriscale serve`` ([server] table; veriscale.server.settings)
SERVER: tuple[Spec, ...] = (
    Spec("server_host", "--host", None, "server.host", _no_env, "127.0.0.1", "a host name or address"),
    Spec("server_port", "--port", None, "server.port", _no_env, 8765, "a TCP port"),
    Spec("server_token", "--token", "VERISCALE_TOKEN", "server.token", str, None, "text"),
    Spec("server_allow_dirs", "--allow-dir", None, "server.allow_dirs", _no_env, (), "folders"),
    Spec("server_max_body", "--max-body", None, "server.max_body", _no_env, "1M", "a size such as 1M"),
    Spec("server_workers", "--workers", None, "server.workers", _no_env, 1, "a whole number"),
)

#: the trainer adapters' verifier ([rewards] table; veriscale.rewards.configure). ``model`` None: the
#: file's top-level ``model``, else embedded
REWARDS: tuple[Spec, ...] = (
    Spec("rewards_model", None, "VERISCALE_REWARD_MODEL", "rewards.model", _text, None, "a model URI"),
    Spec("rewards_criteria", None, "VERISCALE_REWARD_CRITERIA", "rewards.criteria", _text, "general",
         "a criteria name or file"),
    Spec("rewards_scale", None, None, "rewards.scale", _no_env, "letters", "a scale name"),
    Spec("rewards_mode", None, "VERISCALE_REWARD_MODE", "rewards.mode", _text, "group", "group or pointwise"),
    Spec("rewards_joint", None, None, "rewards.joint", _no_env, None, "true or false"),
)

#: what the proxies fan out to and how they pick ([proxy] table; veriscale.proxy.settings). The pick's
#: schedule, aliases and budget are global settings (proxy_schedule, proxy_aliases, proxy_budget)
PROXY: tuple[Spec, ...] = (
    Spec("proxy_verifier", None, None, "proxy.verifier", _no_env, None, "a model URI"),
    Spec("proxy_criteria", None, None, "proxy.criteria", _no_env, "agent", "a criteria name or file"),
    Spec("proxy_k", None, None, "proxy.k", _whole, 2, "a whole number"),
    Spec("proxy_temperature", None, None, "proxy.temperature", _number, 0.8, "a number"),
    Spec("proxy_timeout_s", None, None, "proxy.timeout_s", _number, 120.0, "a number of seconds"),
    Spec("proxy_progress", None, None, "proxy.progress", _no_env, True, "true or false"),
    Spec("proxy_max_tokens", None, None, "proxy.max_tokens", _whole, 1024, "a whole number"),
    Spec("proxy_margin", None, None, "proxy.margin", _number, 0.1, "a number"),
    Spec("proxy_candidates", None, None, "proxy.candidates", _no_env, (), "[[proxy.candidates]] tables"),
)


def section(specs: tuple[Spec, ...], config: Config, flags: Mapping[str, Any] | None = None,
            environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``specs`` resolved by the one rule, keyed without their section prefix (``flags`` by key too:
    ``{"port": 9000}``; None, ``[]`` and ``()`` mean not given)."""
    from veriscale.settings.resolve import resolve_specs

    keys = {spec.name: spec.name.split("_", 1)[1] for spec in specs}
    unknown = set(flags or {}) - set(keys.values())
    if unknown:
        raise TypeError(f"not settings of this section: {sorted(unknown)}")
    given = {name: (flags or {}).get(key) for name, key in keys.items()}
    values, _ = resolve_specs(specs, config, given, environ)
    return {keys[name]: value for name, value in values.items()}
