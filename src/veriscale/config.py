"""The one configuration file for the whole tool (TOML); its settings are resolved by veriscale.settings.

Where it is: ``--config FILE``, else ``$VERISCALE_CONFIG``, else ``<user config dir>/veriscale/
config.toml`` (if it exists). Precedence for every setting: flag > environment > file > default.
Later parts of veriscale (the server, the proxies) add their own tables to this file::

    model = "qwen"                  # the default --model: a URI, or the name of a [models.NAME] table
    store = "~/verify/store.sqlite3"

    [gateway]
    concurrency = 8                 # calls in flight per endpoint (default 4)
    rpm = 600                       # requests a minute per endpoint (0: no limit)
    tpm = 0                         # prompt tokens a minute per endpoint (0: no limit)
    deadline_s = 300                # per model call (0: none)
    routing = "affinity"            # or "round_robin"

    [embedded]
    threads = 4                     # CPU threads of the embedded model (0: one per core)

    [redact]                        # what leaves the store (dashboard, REST API, runs show/export)
    patterns = ["corp-[0-9a-f]{32}"]   # your own secret shapes (regexes), over the built-in ones
    enabled = true                  # false: raw text, for local debugging only

    [models.qwen]                   # one model served by several endpoints, load-balanced
    endpoints = ["http://10.0.0.5:8000/v1#Qwen/Qwen3-8B", "http://10.0.0.6:8000/v1#Qwen/Qwen3-8B"]

    cfg = load_config(None)                       # the file in the user config dir, or defaults
    cfg.model_uris("qwen")                        # -> the two endpoint URIs
    resolve(cfg).store                            # by the one rule (veriscale.settings.resolve)
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from veriscale.errors import UserError, setting
from veriscale.settings.registry import ROUTINGS
from veriscale.settings.source import environment

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

CONFIG_ENV = "VERISCALE_CONFIG"
MAX_CONFIG_DEPTH = 32  # tables and arrays inside each other; no setting needs more than a few
UNKNOWN_SHOWN = 5  # unknown top-level keys a note names (then their count)


def default_config_path() -> Path:
    return Path(platformdirs.user_config_dir("veriscale")) / "config.toml"


@dataclass(frozen=True)
class GatewaySettings:
    """How the gateway schedules calls (``[gateway]`` in the file; flags override)."""

    concurrency: int = 4
    rpm: int = 0
    tpm: int = 0
    deadline_s: float = 0.0
    routing: str = "affinity"

    def __post_init__(self) -> None:
        for name in ("concurrency",):
            if getattr(self, name) < 1:
                raise UserError(f"gateway {name} = {getattr(self, name)} is below 1: give a positive number")
        for name in ("rpm", "tpm", "deadline_s"):
            if getattr(self, name) < 0:
                raise UserError(f"gateway {name} = {getattr(self, name)} is negative: give 0 (no limit) or more")
        if self.routing not in ROUTINGS:
            raise UserError(f"gateway routing '{self.routing}' is unknown: use one of {', '.join(ROUTINGS)}")


@dataclass(frozen=True)
class Config:
    """What the config file says (all optional)."""

    path: Path | None = None
    model: str | None = None
    store: Path | None = None
    gateway: GatewaySettings = field(default_factory=GatewaySettings)
    models: dict[str, tuple[str, ...]] = field(default_factory=dict)
    tables: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)  # TABLES as the file set them, checked
    values: dict[str, Any] = field(default_factory=dict, repr=False)  # "gateway.rpm" -> what the file set
    unknown: tuple[str, ...] = ()  # top-level keys no part of veriscale reads (likely typos)

    def unknown_note(self) -> str | None:
        """One sentence naming the first unknown top-level keys and their count (None when there are none)."""
        if not self.unknown:
            return None
        shown = ", ".join(repr(k) for k in self.unknown[:UNKNOWN_SHOWN])
        more = f" and {len(self.unknown) - UNKNOWN_SHOWN:,} more" if len(self.unknown) > UNKNOWN_SHOWN else ""
        return (f"config file '{self.path}' has {len(self.unknown):,} key(s) veriscale does not read ({shown}{more}), "
                f"ignored: the file knows {', '.join(KNOWN_TOP)} and the tables [{'], ['.join(TABLES)}]; "
                "fix their spelling or remove them")

    def model_uris(self, names: list[str] | tuple[str, ...] | str) -> list[str]:
        """The endpoint URIs ``--model`` values stand for (a [models.NAME] table, or the URI itself)."""
        values = [names] if isinstance(names, str) else list(names)
        uris: list[str] = []
        for value in values:
            uris.extend(self.models.get(value, (value,)))
        return uris


_KIND_WORDS = {bool: "true or false", str: "text", int: "a whole number", float: "a number", list: "a list",
               dict: "a table"}


def _expect(value: Any, kind: type | tuple[type, ...], where: str, path: Path) -> Any:
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        names = " or ".join(_KIND_WORDS.get(k, k.__name__) for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise UserError(f"config file '{path}': {where} must be {names}, not {value!r}: fix that line")
    return value


# The settings tables of the file: table -> key -> allowed TOML types (veriscale.settings.resolve reads them).
TABLES: dict[str, dict[str, type | tuple[type, ...]]] = {
    "gateway": {"concurrency": int, "rpm": int, "tpm": int, "deadline_s": (int, float), "routing": str},
    "embedded": {"threads": int},
    "inputs": {"max_mb": (int, float)},
    "images": {"max_mb": (int, float), "max_side": int, "frames": str},  # veriscale.data.images, data.video
    "rewards": {"model": str, "criteria": str, "scale": str, "mode": str, "group_scheme": str,
                "joint": bool, "length_control": str, "answer_within": (int, float)},
    "runs": {"stale_s": (int, float)},
    "criteria": {"dir": str},
    "storage": {"wait_s": (int, float)},
    "redact": {"patterns": list, "enabled": bool},
    "injection": {"detect": str, "policy": str, "mitigation": str},
    "budget": {"per_decision": str},
    "zip": {"member_mb": (int, float), "file_mb": (int, float), "members": int},  # veriscale.harness.host_caps
    "view": {"timeout_s": (int, float), "memory_mb": (int, float)},
    "handback": {"max_files": int, "max_depth": int},
    "scoring": {"joint": bool, "model_mismatch": str},
    "output": {"quiet": bool},  # what the CLI prints on stderr (veriscale.settings.registry: quiet)
    "proxy": {"verifier": str, "criteria": str, "k": int, "temperature": (int, float), "timeout_s": (int, float),
              "progress": bool, "candidates": list, "max_tokens": int, "schedule": str, "margin": (int, float),
              "aliases": dict, "budget": str},  # veriscale.proxy.settings
    "server": {"host": str, "port": int, "token": str, "allow_dirs": list, "max_body": str,
               "workers": int},  # veriscale.server.settings
}


# What the top level of the file may hold besides TABLES.
KNOWN_TOP = ("model", "store", "[models]", "[prices]")


def _walk(data: dict[str, Any], path: Path) -> None:
    """Refuse, in one sentence naming the key, a file nested past MAX_CONFIG_DEPTH or a NaN or infinite
    number (TOML has ``nan`` and ``inf``; no setting means them). Iterative: any depth is safe here."""
    stack: list[tuple[str, Any, int]] = [(str(k), v, 1) for k, v in data.items()]
    while stack:
        where, value, depth = stack.pop()
        if depth > MAX_CONFIG_DEPTH:
            raise UserError(f"config file '{path}' nests tables or arrays more than {MAX_CONFIG_DEPTH} deep (at "
                            f"'{where[:80]}'): no setting needs that, fix the file")
        if isinstance(value, float) and not math.isfinite(value):
            raise UserError(f"config file '{path}': {where} = {value} is not a finite number: give a number "
                            "(0 means no limit where a setting allows it)")
        if isinstance(value, dict):
            stack.extend((f"{where}.{k}", v, depth + 1) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", v, depth + 1) for i, v in enumerate(value))


def _table(data: dict[str, Any], name: str, allowed: dict[str, type | tuple[type, ...]], path: Path) -> dict[str, Any]:
    """The ``[name]`` table of the file, each key known and of its type."""
    table = _expect(data.get(name, {}), dict, f"[{name}]", path)
    for key, value in table.items():
        if key not in allowed:
            raise UserError(f"config file '{path}': [{name}] has no setting '{key}': use {', '.join(allowed)}")
        _expect(value, allowed[key], f"{name}.{key}", path)
    return table


def _config_text(chosen: Path) -> str:
    """The file's text: ``/dev/null`` (the usual "no config file") reads as empty; a missing path, a
    folder, or another device, pipe or socket is one sentence."""
    fix = f"give a TOML file, /dev/null for none, or drop {setting('config')} / ${CONFIG_ENV}"
    if not chosen.exists():
        raise UserError(f"config file '{chosen}' does not exist: create it or drop {setting('config')} / ${CONFIG_ENV}")
    if chosen.is_dir():
        raise UserError(f"config file '{chosen}' is a folder, not a file: {fix}")
    if not chosen.is_file():
        if os.path.exists(os.devnull) and os.path.samefile(chosen, os.devnull):
            return ""
        raise UserError(f"config file '{chosen}' is not a regular file (a device, pipe or socket): {fix}")
    try:
        return chosen.read_text(encoding="utf-8")
    except OSError as exc:  # no permission to read it
        raise UserError(f"config file '{chosen}' cannot be read ({exc.strerror}): {fix}") from None


def load_config(path: Path | str | None = None) -> Config:
    """Read the config file (``path``, ``$VERISCALE_CONFIG`` or the default location)."""
    named = environment(CONFIG_ENV)  # the one environment reader (veriscale.settings.source)
    chosen = Path(path) if path else (Path(named) if named else None)
    if chosen is None:
        chosen = default_config_path()
        if not chosen.is_file():
            return Config()
    text = _config_text(chosen)
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"config file '{chosen}' is not valid TOML ({exc}): fix it") from None
    except RecursionError:  # arrays or inline tables nested thousands deep: the parser recurses
        raise UserError(f"config file '{chosen}' nests arrays or inline tables too deep to read (at most "
                        f"{MAX_CONFIG_DEPTH} levels make sense): fix the file") from None
    _walk(data, chosen)
    tables = {name: _table(data, name, keys, chosen) for name, keys in TABLES.items()}
    gateway_raw = tables["gateway"]
    if not all(isinstance(p, str) for p in tables["redact"].get("patterns", [])):
        raise UserError(f"config file '{chosen}': redact.patterns must list regular expressions (strings): "
                        "fix that line")
    models: dict[str, tuple[str, ...]] = {}
    for name, table in _expect(data.get("models", {}), dict, "[models]", chosen).items():
        endpoints = _expect(_expect(table, dict, f"[models.{name}]", chosen).get("endpoints"), list,
                            f"models.{name}.endpoints", chosen)
        if not endpoints or not all(isinstance(e, str) and e for e in endpoints):
            raise UserError(f"config file '{chosen}': models.{name}.endpoints must list model URIs")
        models[name] = tuple(endpoints)
    model = data.get("model")
    store = data.get("store")
    return Config(path=chosen, model=_expect(model, str, "model", chosen) if model is not None else None,
                  store=Path(_expect(store, str, "store", chosen)).expanduser() if store is not None else None,
                  gateway=GatewaySettings(**gateway_raw), models=models, tables=tables,
                  unknown=tuple(k for k in data if k not in {"model", "store", "models", "prices", *TABLES}),
                  values={**({"model": model} if model is not None else {}),
                          **({"store": str(store)} if store is not None else {}),
                          **({"prices": data["prices"]} if "prices" in data else {}),  # veriscale.engine.prices
                          **{f"{name}.{k}": v for name, table in tables.items() for k, v in table.items()}})
