"""What the whole CLI invocation runs with: the config file merged with the global flags.

``veriscale [--config F] [--rpm N] [--tpm N] [--deadline S] [--routing R] COMMAND ...`` sets it
once (flag > environment > file > default); commands read it through :func:`current`::

    configure(None, rpm=600)
    current().gateway.rpm      # 600
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from veriscale.config import Config, GatewaySettings, load_config, pick


@dataclass(frozen=True)
class CliSettings:
    config: Config
    gateway: GatewaySettings


_current: CliSettings | None = None


def configure(path: Path | None, *, rpm: int | None = None, tpm: int | None = None,
              deadline_s: float | None = None, routing: str | None = None) -> CliSettings:
    """Read the config file and apply the global flags over its ``[gateway]`` table."""
    global _current
    config = load_config(path)
    base = config.gateway
    gateway = replace(base,  # replace() validates the merged values again rpm=int(pick(flag=rpm, env="VERISCALE_RPM", file=base.rpm)),
                      tpm=int(pick(flag=tpm, env="VERISCALE_TPM", file=base.tpm)),
                      deadline_s=float(pick(flag=deadline_s, env="VERISCALE_DEADLINE", file=base.deadline_s)),
                      routing=str(pick(flag=routing, env="VERISCALE_ROUTING", file=base.routing)))
    _current = CliSettings(config, gateway)
    return _current


def current() -> CliSettings:
    """The settings of this invocation (the config file alone when no callback ran, e.g. in tests)."""
    return _current if _current is not None else configure(None)
