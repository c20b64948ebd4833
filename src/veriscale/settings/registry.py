"""Every setting, declared once: its flag, environment variable, config-file key, type, default
and bounds (:data:`SPECS`), and how an environment value of it is read (:meth:`Spec.from_env`).

The rule that resolves them (flag > environment > file > default) is :mod:`veriscale.settings.resolve`;
what library code reads while it works is :func:`veriscale.settings.value`::

    SPEC["rpm"].flag, SPEC["rpm"].env, SPEC["rpm"].file    # '--rpm', 'VERISCALE_RPM', 'gateway.rpm'
    SPEC["joint"].from_env("yes")                          # 'on'

A setting with no flag (``cache_dir``, ``jail_uid_base``) is read from the environment only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from veriscale.errors import UserError, setting
from veriscale.settings.host_cap_specs import CAPS as HOST_CAPS
from veriscale.verify.injection import DETECT_BY_DEFAULT, POLICIES
from veriscale.verify.resist import DEFAULT_MITIGATION, MITIGATIONS

#: how calls spread over several --model endpoints (veriscale.engine.routing)
ROUTINGS = ("affinity", "round_robin")


def _whole(text: str) -> int:
    return int(text.strip())


def _number(text: str) -> float:
    return float(text.strip())


@dataclass(frozen=True)
class Spec:
    """One setting: where it can be given, how it is read, what it may be."""

    name: str
    flag: str | None  # None: no flag (read from the environment only)
    env: str | None
    file: str | None  # dotted key in the config file ("gateway.rpm")
    parse: Callable[[str], Any]  # how an environment value is read
    default: Any
    kind: str  # "a whole number", ... for messages
    minimum: float | None = None
    above: float | None = None  # an exclusive lower bound ("more than 0")
    choices: tuple[str, ...] = ()
    help: str = ""
    library: bool = False  # read deep in the library (veriscale.settings.value): the CLI hands its choice over
    #: the sentence a bad environment value gets when library code reads it (env name, raw text -> message);
    #: None: the registry's own ("$ENV = 'x' is not KIND: fix it or unset it")
    env_error: Callable[[str, str], str] | None = None

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

    def from_env(self, raw: str, library: bool = False) -> Any:
        """The value of environment text ``raw``, parsed and checked; else one sentence. ``library``:
        the sentence library code has always given for it (``env_error``), where the setting has one."""
        try:
            value = self.parse(raw)
        except ValueError:
            if library and self.env_error:
                raise UserError(self.env_error(self.env or "", raw.strip())) from None
            raise UserError(f"${self.env} = {raw!r} is not {self.kind}: fix it or unset it") from None
        if self.name == "model" and not value:
            raise UserError(f"${self.env} is blank: give a model URI or unset it")
        try:
            return self.check(value, f"${self.env}")
        except UserError:
            if library and self.env_error:
                raise UserError(self.env_error(self.env or "", raw.strip())) from None
            raise


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


def _seconds_error(env: str, raw: str) -> str:
    return f"environment variable {env}={raw!r} is not a positive number of seconds: set it to e.g. 30, or unset it"


def _mib_below_a_tib(text: str) -> float:
    """MiB above 0 and below 2**20 (a TiB): the input cap read from the environment."""
    mb = float(text.strip())
    if not 0 < mb < 1 << 20:
        raise ValueError(text)
    return mb


def _cache_dir(text: str) -> Path:
    return Path(text)


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
         help="CPU threads of the embedded model (0: one per core)", library=True,
         env_error=lambda env, raw: f"${env}={raw!r} is not a whole number of CPU threads: give e.g. 2 (0: one per "
                                    "core) or unset it"),
    Spec("max_input_mb", "--max-input-mb", "VERISCALE_MAX_INPUT_MB", "inputs.max_mb", _mib_below_a_tib, 128.0,
         "a number of MiB", above=0, help="the largest input file or stdin read, in MiB (also after gunzip)",
         library=True,
         env_error=lambda env, raw: f"{env}={raw!r} is not a size in MiB: give a positive number such as 64"),
    Spec("image_max_mb", "--image-max-mb", "VERISCALE_IMAGE_MAX_MB", "images.max_mb", _number, 20.0,
         "a number of MiB", above=0, help="the largest image (or video) file a verdict reads, in MiB",
         library=True,
         env_error=lambda env, raw: f"{env}={raw!r} is not a size in MiB: give a positive number such as 20"),
    Spec("image_max_side", "--image-max-side", "VERISCALE_IMAGE_MAX_SIDE", "images.max_side", _whole, 1024,
         "a whole number of pixels", minimum=0,
         help="images are shrunk so their longer side is at most this many pixels before they are sent "
              "(0: sent as read)", library=True),
    Spec("frames", "--frames", "VERISCALE_FRAMES", "images.frames", str.strip, "8", "a frame choice",
         help="which frames of a video a verdict sees: N (evenly spaced), every:S (one each S seconds) or "
              "keys (the key frames; at most 64)", library=True),
    Spec("criteria_dir", "--criteria-dir", "VERISCALE_CRITERIA_DIR", "criteria.dir", lambda t: Path(t).expanduser(), None,
         "a folder path", help="a folder of your own criteria packs (NAME.md), listed beside the built-in ones",
         library=True),
    Spec("run_stale_s", "--run-stale-s", "VERISCALE_RUN_STALE_S", "runs.stale_s", _number, 30.0,
         "a number of seconds", above=0,
         help="heartbeat age after which a run with no live process is marked interrupted", library=True,
         env_error=_seconds_error),
    Spec("store_wait_s", "--store-wait", "VERISCALE_STORE_WAIT", "storage.wait_s", _number, 30.0,
         "a number of seconds", above=0,
         help="seconds a store write waits for another process's lock before it fails", library=True,
         env_error=_seconds_error),
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
         library=True, env_error=lambda env, raw: f"{env}={raw.lower()!r} is not on or off: use {setting('joint')} "
                                                  f"or unset {env}"),
    # what a reply naming another model than the one asked is (veriscale.models.reply_model.same_model)
    Spec("model_mismatch", "--model-mismatch", "VERISCALE_MODEL_MISMATCH", "scoring.model_mismatch",
         lambda t: t.strip().lower(), "fail", "fail or note", choices=("fail", "note"),
         help="a reply naming another model than the one asked: fail (a failed call) or note (scored, with a note)",
         library=True, env_error=lambda env, raw: f"{env}={raw.lower()!r} is not fail or note: use "
                                                  f"{setting('model_mismatch', 'note')} or unset {env}"),
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
    # what the CLI prints on stderr besides its result (veriscale.cli.common.note, veriscale.cli.options.call_progress)
    Spec("quiet", "--quiet", "VERISCALE_QUIET", "output.quiet", _switch, "off", "on or off", choices=("on", "off"),
         help="silence progress bars and lines and informational notes on stderr; errors and warnings still "
              "print, and so does the notice that verdicts come from the weak embedded model"),
    # read from the environment only (no flag, no file key)
    Spec("cache_dir", None, "VERISCALE_CACHE_DIR", None, _cache_dir, None, "a folder path",
         help="where the embedded model's file hashes are kept (None: the per-user cache dir)"),
    Spec("jail_uid_base", None, "VERISCALE_JAIL_UID_BASE", None, _whole, 1_900_000_000, "a whole number", minimum=0,
         help="the first host user id given to sessions when veriscale runs as root"),
)
SPEC = {spec.name: spec for spec in SPECS}

