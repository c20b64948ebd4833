"""How ``veriscale serve`` is set up: flags over ``$VERISCALE_TOKEN`` over the config file's
``[server]`` table over defaults::

    [server]
    host = "127.0.0.1"
    port = 8765
    allow_dirs = ["~/agent-runs"]     # the only folders a job (and the harness pages) may read
    max_body = "1M"
    workers = 1                       # jobs run at once (the embedded model takes one)
    # token = "..."                   # better in $VERISCALE_TOKEN; required off loopback

    [redact]                          # shared with runs show/export: secrets in answers and events
    patterns = ["corp-[0-9a-f]{32}"]
    # enabled = false                 # raw text (also --no-redact): local debugging only

    settings = server_settings(load_config(None), host="0.0.0.0", token="s3cret")
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veriscale.config import Config, pick
from veriscale.errors import UserError, setting
from veriscale.redact import Redactor
from veriscale.server.security import is_loopback
from veriscale.sizes import parse_size

TOKEN_ENV = "VERISCALE_TOKEN"
DEFAULT_PORT = 8765
_KNOWN = {"host": str, "port": int, "token": str, "allow_dirs": list, "max_body": str, "workers": int}


@dataclass(frozen=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    token: str | None = None
    allow_dirs: tuple[Path, ...] = ()
    max_body_bytes: int = 1 << 20
    workers: int = 1
    redactor: Redactor = field(default_factory=Redactor)  # what every API answer and event goes through

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)


def server_settings(cfg: Config, *, host: str | None = None, port: int | None = None, token: str | None = None,
                    allow_dirs: list[Path] | None = None, max_body: str | None = None,
                    workers: int | None = None, redactor: Redactor | None = None) -> ServerSettings:
    """Flags (the keyword arguments) over the environment over ``[server]``; checked. ``redactor``
    comes from the ``redact`` settings (``[redact]`` in the file, ``--redact`` / ``--no-redact``)."""
    table: dict[str, Any] = cfg.raw.get("server", {})
    if not isinstance(table, dict):
        raise UserError(f"config file '{cfg.path}': [server] must be a table: fix that section")
    for key, value in table.items():
        if key not in _KNOWN:
            raise UserError(f"config file '{cfg.path}': [server] has no setting '{key}': use {', '.join(_KNOWN)}")
        if not isinstance(value, _KNOWN[key]) or isinstance(value, bool):
            raise UserError(f"config file '{cfg.path}': server.{key} must be {_KNOWN[key].__name__}, not {value!r}: "
                            "fix that line")
    dirs = allow_dirs if allow_dirs else [Path(str(d)).expanduser() for d in table.get("allow_dirs", [])]
    for folder in dirs:
        if not folder.is_dir():
            raise UserError(f"{setting('allow_dirs', str(folder))} is not a folder: give a folder that exists")
    settings = ServerSettings(
        host=pick(flag=host, file=table.get("host"), default="127.0.0.1"),
        port=pick(flag=port, file=table.get("port"), default=DEFAULT_PORT),
        token=pick(flag=token, env=TOKEN_ENV, file=table.get("token"), default=None) or None,
        allow_dirs=tuple(folder.resolve() for folder in dirs),
        max_body_bytes=parse_size(pick(flag=max_body, file=table.get("max_body"), default="1M")),
        workers=pick(flag=workers, file=table.get("workers"), default=1),
        redactor=redactor or Redactor(),
    )
    if not 0 < settings.port < 65536:
        raise UserError(f"{setting('port', settings.port)} is not a TCP port: give 1-65535")
    if settings.workers < 1:
        raise UserError(f"{setting('workers', settings.workers)} is below 1: give how many jobs may run at once")
    if not settings.loopback and not settings.token:
        raise UserError(f"{setting('host', settings.host)} is reachable from other machines: set {setting('token')} "
                        f"(or ${TOKEN_ENV}) so "
                        "only you can read runs and submit jobs, or bind 127.0.0.1")
    return settings
