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
from veriscale.config import Config
from veriscale.errors import UserError, setting
from veriscale.redact import Redactor
from veriscale.server.security import is_loopback
from veriscale.settings.sections import SERVER, section
from veriscale.sizes import parse_size

TOKEN_ENV = "VERISCALE_TOKEN"
DEFAULT_PORT = 8765


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
    """Flags (the keyword arguments) over the environment over ``[server]`` over defaults (the
    ``SERVER`` section of :mod:`veriscale.settings.sections`, by the one rule); checked. ``redactor``
    comes from the ``redact`` settings (``[redact]`` in the file, ``--redact`` / ``--no-redact``)."""
    got = section(SERVER, cfg, {"host": host, "port": port, "token": token, "allow_dirs": allow_dirs,
                                "max_body": max_body, "workers": workers})
    dirs = [Path(str(d)).expanduser() for d in got["allow_dirs"]]
    for folder in dirs:
        if not folder.is_dir():
            raise UserError(f"{setting('allow_dirs', str(folder))} is not a folder: give a folder that exists")
    settings = ServerSettings(host=got["host"], port=got["port"], token=got["token"] or None,
                              allow_dirs=tuple(folder.resolve() for folder in dirs),
                              max_body_bytes=parse_size(got["max_body"]), workers=got["workers"],
                              redactor=redactor or Redactor())
    if not 0 < settings.port < 65536:
        raise UserError(f"{setting('port', settings.port)} is not a TCP port: give 1-65535")
    if settings.workers < 1:
        raise UserError(f"{setting('workers', settings.workers)} is below 1: give how many jobs may run at once")
    if not settings.loopback and not settings.token:
        raise UserError(f"{setting('host', settings.host)} is reachable from other machines: set {setting('token')} "
                        f"(or ${TOKEN_ENV}) so "
                        "only you can read runs and submit jobs, or bind 127.0.0.1")
    return settings
