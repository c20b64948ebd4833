"""What one CLI invocation runs with: one typed, frozen :class:`Settings`, resolved by one rule.

Every setting is declared once in :data:`SPECS` (its flag, environment variable, config-file
key, type, default and bounds) and resolved the same way: flag > environment > file > default.
The app callback resolves the global flags; each command adds its own flags and passes the
result down (to :func:`veriscale.cli.options.open_model`, ``open_store``, the verifier)::

    configure(None, {"rpm": 600})                                  # veriscale --rpm 600 ...
    s = current().with_flags(model=["embedded"], concurrency=2)    # the command's own flags
    s.rpm, s.concurrency, s.origin("rpm")                          # 600, 2, '--rpm'

``veriscale settings`` prints each value and where it came from.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from veriscale.config import ROUTINGS, Config, load_config
from veriscale.errors import UserError
from veriscale.harness.host_caps import CAPS as HOST_CAPS
from veriscale.harness.host_caps import HostCaps
from veriscale.verify.injection import DETECT_BY_DEFAULT, POLICIES
from veriscale.verify.resist import DEFAULT_MITIGATION, MITIGATIONS

if TYPE_CHECKING:
    from veriscale.redact import Redactor

_CAP_DEFAULTS = HostCaps()  # the Settings fields of the host caps take their defaults from it


def _whole(text: str) -> int:
    return int(text.strip())


def _number(text: str) -> float:
    return float(text.strip())


@dataclass(frozen=True)
class Spec:
    """One setting: where it can be given, how it is read, what it may be."""

    name: str
    flag: str
    env: str | None
    file: str | None  # dotted key in the config file ("gateway.rpm")
    parse: Callable[[str], Any]  # how an environment value is read
    default: Any
    kind: str  # "a whole number", ... for messages
    minimum: float | None = None
    above: float | None = None  # an exclusive lower bound ("more than 0")
    choices: tuple[str, ...] = ()
    help: str = ""
    library: bool = False  # read deep in the library (veriscale.runtime): the CLI hands its choice over

    def check(self, value: Any, where: str) -> Any:
        """``value`` if it is allowed, else one sentence naming ``where`` it came from."""
        if value is None:
            return value
        if isinstance(value, float) and not math.isfinite(value):
            raise UserError(f"{where} = {value!r} is not {self.kind}: give a finite number")
        if self.above is not None and value <= self.above:
            raise UserError(f"{where} = {value!r} is not more than {self.above:g}: give a positive number")
        if self.minimum is not None and value < self.minimum:
            lowest = "0 (no limit)" if self.minimum == 0 else f"{self.minimum:g}"
            raise UserError(f"{where} = {value!r} is below {self.minimum:g}: give {lowest} or more")
        if self.choices and value not in self.choices:
            raise UserError(f"{where} = {value!r} is unknown: use one of {', '.join(self.choices)}")
        return value


def _switch(text: str) -> str:
    """"on" or "off" from on/off, true/false, yes/no, 1/0 (any case)."""
    word = str(text).strip().lower()
    if word in ("on", "true", "yes", "1"):
        return "on"
    if word in ("off", "false", "no", "0"):
        return "off"
    raise ValueError(word)


def _model_list(text: str) -> tuple[str, ...]:
    return tuple(part for part in text.split() if part)


def _no_env(text: str) -> Any:  # settings without an environment variable
    raise ValueError(text)


@dataclass(frozen=True)
class _BudgetSpec(Spec):
    """The budget setting: "calls=N" or "tokens=N", kept in that canonical form, refused in one sentence."""

    def check(self, value: Any, where: str) -> Any:
        from veriscale.selection.budget.form import parse_budget

        return None if value is None else str(parse_budget(str(value), where=where))


@dataclass(frozen=True)
class _PricesSpec(Spec):
    """The price table: text or the file's ``[prices]`` table, kept as given but read once here, so a
    malformed one is one sentence naming where it came from, whichever command runs."""

    def check(self, value: Any, where: str) -> Any:
        from veriscale.engine.prices import parse_prices, table_from_mapping

        if value is None or value == "" or value == {}:
            return value
        if isinstance(value, Mapping):
            table_from_mapping(value, where.removesuffix(f": {self.file}"))
        elif not (isinstance(value, tuple) and all(isinstance(e, tuple) for e in value)):
            parse_prices(str(value), where)
        return value


SPECS: tuple[Spec, ...] = (
    Spec("model", "--model", "VERISCALE_MODEL", "model", _model_list, ("embedded",), "a model URI or [models.NAME]",
         help="the model URIs (or config model names) every verdict uses"),
    Spec("store", "--store", "VERISCALE_STORE", "store", lambda t: Path(t).expanduser(), None, "a file path",
         help="the SQLite store (None: the per-user data dir)"),
    Spec("concurrency", "--concurrency", "VERISCALE_CONCURRENCY", "gateway.concurrency", _whole, 4, "a whole number",
         minimum=1, help="calls in flight per HTTP endpoint"),
    Spec("rpm", "--rpm", "VERISCALE_RPM", "gateway.rpm", _whole, 0, "a whole number", minimum=0,
         help="requests a minute per endpoint (0: no limit)"),
    Spec("tpm", "--tpm", "VERISCALE_TPM", "gateway.tpm", _whole, 0, "a whole number", minimum=0,
         help="prompt tokens a minute per endpoint (0: no limit)"),
    Spec("deadline_s", "--deadline", "VERISCALE_DEADLINE", "gateway.deadline_s", _number, 0.0, "a number of seconds",
         minimum=0, help="seconds one model call may take (0: none)"),
    Spec("routing", "--routing", "VERISCALE_ROUTING", "gateway.routing", str.strip, "affinity", "a routing name",
         choices=ROUTINGS, help="how calls spread over several endpoints"),
    Spec("threads", "--threads", "VERISCALE_THREADS", "embedded.threads", _whole, 0, "a whole number", minimum=0,
         help="CPU threads of the embedded model (0: one per core)", library=True),
    Spec("max_input_mb", "--max-input-mb", "VERISCALE_MAX_INPUT_MB", "inputs.max_mb", _number, 128.0,
         "a number of MiB", above=0, help="the largest input file or stdin read, in MiB (also after gunzip)",
         library=True),
    Spec("run_stale_s", "--run-stale-s", "VERISCALE_RUN_STALE_S", "runs.stale_s", _number, 30.0,
         "a number of seconds", above=0,
         help="heartbeat age after which a run with no live process is marked interrupted", library=True),
    Spec("store_wait_s", "--store-wait", "VERISCALE_STORE_WAIT", "storage.wait_s", _number, 30.0,
         "a number of seconds", above=0,
         help="seconds a store write waits for another process's lock before it fails", library=True),
    Spec("redact", "--redact", None, "redact.patterns", _no_env, (), "regular expressions",
         help="your own secret shapes (regexes) redacted, over the built-in ones, in what leaves the store"),
    Spec("redact_secrets", "--no-redact", None, "redact.enabled", _no_env, True, "true or false",
         help="redact secrets in the dashboard, the REST API and runs show/export (off: local debugging only)"),
    Spec("injection_detect", "--injection-detect", "VERISCALE_INJECTION_DETECT", "injection.detect", _switch,
         "on" if DETECT_BY_DEFAULT else "off", "on or off", choices=("on", "off"),
         help="flag candidates whose text reads as an injection (injection_suspected, with its span)"),
    Spec("injection_policy", "--injection-policy", "VERISCALE_INJECTION_POLICY", "injection.policy", str.strip,
         "none", "a policy name", choices=POLICIES,
         help="what select does with a suspected candidate: none, lose_ties or exclude"),
    Spec("injection_mitigation", "--injection-mitigation", "VERISCALE_INJECTION_MITIGATION", "injection.mitigation",
         str.strip, DEFAULT_MITIGATION, "a mitigation name", choices=MITIGATIONS,
         help="how judge prompts resist injected text: none, neutralise, warn or both"),
    Spec("reward_group_scheme", "--group-scheme", "VERISCALE_REWARD_GROUP_SCHEME", "rewards.group_scheme", str.strip,
         "sparse", "a group scheme name", choices=("round_robin", "sparse"),
         help="how RL rewards rank a group: round_robin (every pair) or sparse (at most 3n comparisons)"),
    # RL rewards at the trainer's edges (veriscale.rewards.length, veriscale.rewards.batching)
    Spec("reward_length_control", "--length-control", "VERISCALE_REWARD_LENGTH_CONTROL", "rewards.length_control",
         str.strip, "off", "a length control name", choices=("off", "residual"),
         help="RL rewards with the within-group reward-length slope taken out (residual) or as judged (off)"),
    Spec("reward_answer_within", "--answer-within", "VERISCALE_REWARD_ANSWER_WITHIN", "rewards.answer_within",
         _number, 0.0, "a number of seconds", minimum=0,
         help="serve-reward answers every request within this many seconds (0: no limit); set it below "
              "the trainer client's timeout (OpenRLHF: 180)"),
    # honest cost: money only where a price table is set (veriscale.engine.prices)
    _PricesSpec("prices", "--prices", "VERISCALE_PRICES", "prices", str.strip, "",
         "MODEL=PROMPT/CACHED/COMPLETION entries",
         help="US$ per million prompt/cached/completion tokens per model ([prices] table); unset: no money column"),
    _BudgetSpec("budget", "--budget", "VERISCALE_BUDGET", "budget.per_decision", str.strip, None,
                "a budget such as calls=60 or tokens=40000",
                help="what one decision may spend, calls=N or tokens=N (cache hits do not count); the cost "
                     "controller plans PPT's pivots, repeats and criteria inside it"),
    # the host's caps on what it inflates from rollouts and takes back from sessions (veriscale.harness.host_caps)
    *(Spec(name, "--" + name.replace("_", "-"), cap.env, cap.file, cap.parse, cap.default, cap.kind,
           minimum=1 if cap.whole else None, above=None if cap.whole else 0, help=cap.help, library=True)
      for name, cap in HOST_CAPS.items()),
    Spec("joint", "--joint", "VERISCALE_JOINT", "scoring.joint", _switch, "off", "on or off", choices=("on", "off"),
         help="one model call reads every criterion's grade (and both responses of a pair), each at its own slot",
         library=True),
    # what a reply naming another model than the one asked is (veriscale.models.openai_compat.same_model)
    Spec("model_mismatch", "--model-mismatch", "VERISCALE_MODEL_MISMATCH", "scoring.model_mismatch", str.strip,
         "fail", "fail or note", choices=("fail", "note"),
         help="a reply naming another model than the one asked: fail (a failed call) or note (scored, with a note)",
         library=True),
    # the proxy's pick (veriscale.proxy.pick): the file key is read from the [proxy] table
    Spec("proxy_schedule", "--proxy-schedule", "VERISCALE_PROXY_SCHEDULE", "proxy.schedule", str.strip, "auto",
         "a schedule name", choices=("auto", "early", "round_robin"),
         help="how the proxy picks: early (score each candidate as it arrives, compare the top two if close), "
              "round_robin (every pair at N <= 3, PPT above), auto (early when joint is on and N > 3)"),
    # the proxy's model names (veriscale.proxy.settings.parse_aliases): text here, a table in the file
    Spec("proxy_aliases", "--proxy-aliases", "VERISCALE_PROXY_ALIASES", "proxy.aliases", str.strip, "",
         "NAME=MODEL*N entries",
         help="model names the proxy answers, each with its candidate pool (\"fast=qwen*2; best=qwen*3, gpt*1\", "
              "or the [proxy.aliases] table); unset: every name goes to the one pool"),
    # the proxy's pick inside a budget of verifier calls or prompt tokens (veriscale.proxy.budget_plan)
    _BudgetSpec("proxy_budget", "--proxy-budget", "VERISCALE_PROXY_BUDGET", "proxy.budget", str.strip, None,
                "a budget such as calls=6 or tokens=20000",
                help="what the proxy's pick may spend per request, calls=N or tokens=N of verifier calls (cache "
                     "hits do not count); the pick chooses the schedule and criteria it affords"),
)
SPEC = {spec.name: spec for spec in SPECS}


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
    run_stale_s: float = 30.0
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
    return spec.check(value, spec.flag)


def _from_env(spec: Spec, raw: str) -> Any:
    try:
        value = spec.parse(raw)
    except ValueError:
        raise UserError(f"${spec.env} = {raw!r} is not {spec.kind}: fix it or unset it") from None
    if spec.name == "model" and not value:
        raise UserError(f"${spec.env} is blank: give a model URI or unset it")
    return spec.check(value, f"${spec.env}")


def _from_file(spec: Spec, config: Config) -> tuple[bool, Any]:
    if spec.file is None or spec.file not in config.values:
        return False, None
    value = config.values[spec.file]
    if spec.name == "model":
        value = (value,)
    elif spec.name == "redact":
        value = tuple(value)
    elif spec.name == "store":
        value = Path(value).expanduser()
    elif spec.parse is _number:
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
    environ = os.environ if environ is None else environ
    flags = flags or {}
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for spec in SPECS:
        flag = flags.get(spec.name)
        if flag is not None and flag != [] and flag != ():
            values[spec.name], origins[spec.name] = _from_flag(spec, flag), spec.flag
            continue
        raw = environ.get(spec.env) if spec.env else None
        if raw is not None and raw.strip():
            values[spec.name], origins[spec.name] = _from_env(spec, raw), f"${spec.env}"
            continue
        found, value = _from_file(spec, config)
        if found:
            values[spec.name], origins[spec.name] = value, f"config file {spec.file}"
            continue
        values[spec.name] = spec.default
    return Settings(config=config, **values, origins=origins)


_current: Settings | None = None


def configure(path: Path | None, flags: Mapping[str, Any] | None = None) -> Settings:
    """Read the config file and resolve the global flags; the result is :func:`current`."""
    global _current
    config = load_config(path)
    _current = resolve(config, flags)
    unknown = config.unknown_note()
    if unknown:
        from veriscale.cli.common import note

        note(unknown)
    return _current


def current() -> Settings:
    """The settings of this invocation (the config file alone when no callback ran, e.g. in tests)."""
    return _current if _current is not None else configure(None)


def names() -> tuple[str, ...]:
    """Every setting's name, in :data:`SPECS` order."""
    return tuple(f.name for f in fields(Settings) if f.name in SPEC)
