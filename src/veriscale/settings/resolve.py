"""The one rule that resolves every setting: flag > environment > file > default, into one typed,
frozen :class:`Settings` (each setting declared once in :data:`veriscale.settings.registry.SPECS`)::

    s = resolve(load_config(None), {"rpm": 600})      # the global flags, by setting name
    s = s.with_flags(model=["embedded"], concurrency=2)  # a command's own flags over them
    s.rpm, s.concurrency, s.origin("rpm")             # 600, 2, '--rpm'

The environment is read through :func:`veriscale.settings.source.environment`, the one reader.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from veriscale.config import Config
from veriscale.errors import UserError
from veriscale.harness.host_caps import HostCaps
from veriscale.settings.registry import SPEC, SPECS, Spec, _number, _switch
from veriscale.settings.source import environment
from veriscale.verify.injection import DETECT_BY_DEFAULT
from veriscale.verify.resist import DEFAULT_MITIGATION

if TYPE_CHECKING:
    from veriscale.redact import Redactor

_CAP_DEFAULTS = HostCaps()  # the Settings fields of the host caps take their defaults from it


@dataclass(frozen=True)
class Settings:
    """The resolved settings of one command (see :data:`SPECS` for each one's sources)."""

    config: Config = field(default_factory=Config)
    model: tuple[str, ...] = ("embedded",)
    store: Path | None = None
    concurrency: int = 4
    rpm: int = 0
    tpm: int = 0
    deadline_s: float = 0.0
    routing: str = "affinity"
    threads: int = 0
    max_input_mb: float = 128.0
    image_max_mb: float = 20.0
    image_max_side: int = 1024
    frames: str = "8"
    run_stale_s: float = 30.0
    criteria_dir: Path | None = None
    store_wait_s: float = 30.0
    redact: tuple[str, ...] = ()
    redact_secrets: bool = True
    injection_detect: str = "on" if DETECT_BY_DEFAULT else "off"
    injection_policy: str = "none"
    injection_mitigation: str = DEFAULT_MITIGATION
    reward_group_scheme: str = "sparse"
    reward_length_control: str = "off"
    reward_answer_within: float = 0.0
    prices: Any = ""  # text or the file's [prices] table; veriscale.engine.prices.price_table reads it
    budget: str | None = None
    zip_member_mb: float = _CAP_DEFAULTS.zip_member_mb  # these seven: veriscale.harness.host_caps
    zip_file_mb: float = _CAP_DEFAULTS.zip_file_mb
    zip_members: int = _CAP_DEFAULTS.zip_members
    view_timeout_s: float = _CAP_DEFAULTS.view_timeout_s
    view_memory_mb: float = _CAP_DEFAULTS.view_memory_mb
    handback_max_files: int = _CAP_DEFAULTS.handback_max_files
    handback_max_depth: int = _CAP_DEFAULTS.handback_max_depth
    joint: str = "off"
    model_mismatch: str = "fail"
    proxy_schedule: str = "auto"
    proxy_aliases: Any = ""  # text, or the file's [proxy.aliases] table (veriscale.proxy.settings.parse_aliases)
    proxy_budget: str | None = None  # per proxied request: "calls=6" or "tokens=20000"
    quiet: str = "off"  # "on": the CLI prints no progress and no informational note (veriscale.cli.common)
    cache_dir: Path | None = None  # None: the per-user cache dir (environment only)
    jail_uid_base: int = 1_900_000_000  # environment only
    origins: Mapping[str, str] = field(default_factory=dict, compare=False)

    def origin(self, name: str) -> str:
        """Where ``name`` came from: its flag, its environment variable, the config file, or "default"."""
        return self.origins.get(name, "default")

    def chosen(self, name: str) -> Any:
        """``name``'s value when a flag or the config file gave it, else None (environment and default
        are what library code reads by itself)."""
        origin = self.origin(name)
        return None if origin == "default" or origin.startswith("$") else getattr(self, name)

    def injection(self) -> dict[str, Any]:
        """The injection settings as Verifier / SelectionSettings keywords."""
        return {"injection_detect": self.injection_detect == "on", "injection_mitigation": self.injection_mitigation}

    def model_uris(self) -> list[str]:
        """The endpoint URIs the model setting stands for ([models.NAME] tables expanded)."""
        return self.config.model_uris(list(self.model))

    def redactor(self, extra: tuple[str, ...] | list[str] = ()) -> "Redactor":
        """What leaves the store goes through (:mod:`veriscale.redact`): the built-in shapes, the
        ``redact`` patterns and a command's ``extra`` ones (a flag adds to the file's list, never drops
        it); a bad pattern is one sentence naming where it came from."""
        from veriscale.redact import Redactor

        origin = self.origin("redact")
        own = Redactor.build(self.redact, enabled=self.redact_secrets,
                             where=None if origin in ("default", SPEC["redact"].flag) else origin)
        return own.adding(extra)

    def with_flags(self, **flags: Any) -> "Settings":
        """These settings with a command's own flags over them (None: not given)."""
        given = {name: value for name, value in flags.items() if value is not None and value != [] and value != ()}
        unknown = set(given) - set(SPEC)
        if unknown:
            raise TypeError(f"not settings: {sorted(unknown)}")
        values, origins = {}, dict(self.origins)
        for name, value in given.items():
            values[name] = _from_flag(SPEC[name], value)
            origins[name] = SPEC[name].flag
        return replace(self, **values, origins=origins)

    def as_rows(self) -> list[dict[str, Any]]:
        """One row a setting: name, value, origin, flag, environment variable, file key."""
        return [{"name": s.name, "value": _plain(getattr(self, s.name)), "origin": self.origin(s.name),
                 "flag": s.flag, "env": s.env, "file": s.file, "help": s.help} for s in SPECS]




def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def _from_flag(spec: Spec, value: Any) -> Any:
    if spec.name in ("model", "redact"):
        value = tuple([value] if isinstance(value, str) else value)
    elif spec.name == "store":
        value = Path(value).expanduser()
    elif spec.parse is _switch:
        try:
            value = _switch(value)
        except ValueError:
            pass  # the check names the choices
    elif isinstance(value, str) and spec.env:  # text given after a sub-command that reads it (cli/setting_flags.py)
        try:
            value = spec.parse(value)
        except ValueError:
            raise UserError(f"{spec.flag} {value!r} is not {spec.kind}: fix it") from None
    return spec.check(value, spec.flag)


def _from_env(spec: Spec, raw: str) -> Any:
    return spec.from_env(raw)


def _from_file(spec: Spec, config: Config) -> tuple[bool, Any]:
    if spec.file is None or spec.file not in config.values:
        return False, None
    value = config.values[spec.file]
    if spec.name == "model":
        value = (value,)
    elif spec.name == "redact":
        value = tuple(value)
    elif spec.name in ("store", "criteria_dir"):  # paths: the flag's and the environment's are Paths too
        value = Path(value).expanduser()
    elif spec.parse is _number or (isinstance(spec.default, float) and isinstance(value, int)
                                   and not isinstance(value, bool)):
        value = float(value)
    elif spec.parse is _switch:
        try:
            value = _switch(value)
        except ValueError:
            raise UserError(f"config file '{config.path}': {spec.file} = {value!r} is not on or off: fix it") from None
    return True, spec.check(value, f"config file '{config.path}': {spec.file}")


def resolve(config: Config, flags: Mapping[str, Any] | None = None,
            environ: Mapping[str, str] | None = None) -> Settings:
    """Every setting by flag > environment > file > default (``flags``: name -> value, None unset)."""
    values, origins = resolve_specs(SPECS, config, flags, environ)
    return Settings(config=config, **values, origins=origins)


def resolve_specs(specs: tuple[Spec, ...], config: Config, flags: Mapping[str, Any] | None = None,
                  environ: Mapping[str, str] | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """The rule itself, over ``specs``: each one's value (flag > environment > file > default) and, for
    those not left at their default, where it came from (its flag, ``$ENV`` or ``config file KEY``)."""
    flags = flags or {}
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for spec in specs:
        flag = flags.get(spec.name)
        if flag is not None and flag != [] and flag != ():
            values[spec.name], origins[spec.name] = _from_flag(spec, flag), spec.flag or spec.name
            continue
        raw = environment(spec.env, environ) if spec.env else None
        if raw is not None:
            values[spec.name], origins[spec.name] = _from_env(spec, raw), f"${spec.env}"
            continue
        found, value = _from_file(spec, config)
        if found:
            values[spec.name], origins[spec.name] = value, f"config file {spec.file}"
            continue
        values[spec.name] = spec.default
    return values, origins


def names() -> tuple[str, ...]:
    """Every setting's name, in :data:`SPECS` order."""
    return tuple(f.name for f in fields(Settings) if f.name in SPEC)
