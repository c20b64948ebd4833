"""What one CLI invocation runs with: the library's settings (:mod:`veriscale.settings`) resolved
once for this process, and which command reads which of them.

Every setting is declared once in :data:`veriscale.settings.registry.SPECS` and resolved by one
rule, flag > environment > file > default (:mod:`veriscale.settings.resolve`). The app callback
resolves the global flags (:func:`configure`, before or after the sub-command); each command adds
its own flags and passes the result down (to :func:`veriscale.cli.options.open_model`,
``open_store``, the verifier)::

    configure(None, {"rpm": 600})                                  # veriscale --rpm 600 ...
    s = current().with_flags(model=["embedded"], concurrency=2)    # the command's own flags
    s.rpm, s.concurrency, s.origin("rpm")                          # 600, 2, '--rpm'

A flag given to a command that does not read its setting is refused in one sentence
(:func:`refuse_unused`, from :data:`USES`); the environment's and the config file's values are
global and never refused. ``veriscale settings`` prints each value and where it came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from veriscale.config import load_config
from veriscale.errors import UserError
from veriscale.settings import choose
from veriscale.settings.registry import SPEC, SPECS, Spec, _switch  # noqa: F401  (re-exported)
from veriscale.settings.resolve import Settings, names, resolve  # noqa: F401  (re-exported)

_current: Settings | None = None
_given: dict[str, Any] = {}  # the global flags given so far in this invocation (name -> value)
_config_path: Path | None = None
_pending_notes: list[str] = []  # the config file's note, said once the command's own flags are read


def configure(path: Path | None, flags: Mapping[str, Any] | None = None, *, quiet: bool = False,
              defer_notes: bool = False) -> Settings:
    """Read the config file and resolve the global flags; the result is :func:`current`, and what a
    flag or the file chose for the settings library code reads is handed over
    (:func:`veriscale.settings.choose`). ``quiet``: the file's note was said already; ``defer_notes``
    (the app callback): kept for :func:`take_notes` either way, to be said once a ``--quiet`` after the
    sub-command is read."""
    global _current, _given, _config_path, _pending_notes
    config = load_config(path)
    _current = resolve(config, flags)
    _given = {name: v for name, v in (flags or {}).items() if v is not None and v != [] and v != ()}
    _config_path = path
    if not quiet:
        unknown = config.unknown_note()
        _pending_notes = [unknown] if unknown else []
    choose({spec.name: _current.chosen(spec.name) for spec in SPECS if spec.library})
    return _current


def take_notes() -> list[str]:
    """The config file's pending notes, handed over once (the caller says them with
    :func:`veriscale.cli.common.note`, which says nothing under ``--quiet``)."""
    global _pending_notes
    pending, _pending_notes = _pending_notes, []
    return pending


def given_flags() -> dict[str, Any]:
    """The global flags this invocation was given so far (setting name -> value)."""
    return dict(_given)


def reconfigure(path: Path | None, flags: Mapping[str, Any]) -> Settings:
    """:func:`configure` again with global flags given after the sub-command (``flags``) over the ones
    given before it, and ``path`` (``--config`` after the sub-command) over the earlier one."""
    return configure(path if path is not None else _config_path, {**_given, **flags},
                     quiet=path is None, defer_notes=True)  # the same file's note is pending or said already


def current() -> Settings:
    """The settings of this invocation (the config file alone when no callback ran, e.g. in tests)."""
    return _current if _current is not None else configure(None)


def is_quiet() -> bool:
    """Whether this invocation is quiet (``--quiet``, ``$VERISCALE_QUIET`` or the file's ``output.quiet``):
    no progress and no informational note on stderr (:func:`veriscale.cli.common.note`). False before the
    settings are resolved (a library function called on its own), so nothing is ever hidden by accident."""
    return _current is not None and _current.quiet == "on"


# Which settings each command reads (by its path, "runs list"). A flag of any other setting given
# to it is refused in one sentence; its environment variable and config-file key are global.
_INJECTION = frozenset({"injection_detect", "injection_mitigation"})
_CALLS = frozenset({"model", "concurrency", "rpm", "tpm", "deadline_s", "routing", "threads", "joint",
                    "model_mismatch"})  # a command that calls a model (the gateway, the backend, the reply checks)
_STORE = frozenset({"store", "store_wait_s", "run_stale_s"})
_CAPS = frozenset({"zip_member_mb", "zip_file_mb", "zip_members", "view_timeout_s", "view_memory_mb",
                   "handback_max_files", "handback_max_depth"})
_READS = frozenset({"max_input_mb"}) | _CAPS  # inputs: files, stdin, rollout folders and zips
_IMAGES = frozenset({"image_max_mb", "image_max_side", "frames"})  # images and video frames a verdict sees
_REWARDS = frozenset({"reward_group_scheme", "reward_length_control", "reward_answer_within"})
_EVERY = frozenset(spec.name for spec in SPECS if spec.flag)
_CRITERIA = frozenset({"criteria_dir"})  # a command that loads a criteria pack by name
_VERDICTS = _CALLS | _INJECTION | _STORE | _READS | _CRITERIA | _IMAGES
#: what every command reads: how much it prints on stderr besides its result
_OUTPUT = frozenset({"quiet"})
USES: dict[str, frozenset[str]] = {path: uses | _OUTPUT for path, uses in {
    "score": _VERDICTS,
    "compare": _VERDICTS,
    "select": _VERDICTS | {"injection_policy", "budget"},
    "select-many": _VERDICTS | {"injection_policy", "budget"},
    "bench": _CALLS | _STORE | _READS | _CRITERIA | {"prices"},
    "track": _CALLS | _STORE | _IMAGES | {"max_input_mb"},
    "serve-reward": _CALLS | _STORE | _REWARDS | _CRITERIA,
    "serve": _EVERY - _REWARDS - {"budget"},
    "mcp": _VERDICTS | {"injection_policy", "redact", "redact_secrets"},
    "race": _CALLS | _INJECTION | _STORE | _CRITERIA | {"max_input_mb", "injection_policy"},
    "settings": _EVERY,
    "models check": _CALLS | _STORE | {"image_max_side"},
    "models calibrate": _CALLS | _STORE | {"max_input_mb"},
    "runs list": _STORE | {"redact", "redact_secrets"},
    "runs show": _STORE | {"redact", "redact_secrets"},
    "runs export": _STORE | {"redact", "redact_secrets"},
    "runs cost": _STORE | {"prices"},
    "runs prune": _STORE,
    "runs vacuum": _STORE,
    "harness materialize": _READS,
    "harness claims": _READS,
    "harness score": _READS,
    "harness run": _READS | _CALLS | _STORE,
    "harness evolve": _READS | _CALLS | _STORE | _INJECTION,  # reads rollouts, asks a model
    "harness jail-run": _CAPS,
    "harness skills list": frozenset({"max_input_mb"}),
    "harness skills show": frozenset({"max_input_mb"}),
    "criteria list": _CRITERIA | {"max_input_mb"},
    "criteria show": _CRITERIA | {"max_input_mb"},
}.items()}
#: why a command does not read a setting, where a plainer word helps than the setting's help
_WHY = {
    ("race", "budget"): "race picks among its runs with the fixed PPT schedule (--pivots, --repeats), "
                        "not inside a budget; use select --budget to spend a budget per decision",
    ("bench", "budget"): "bench sweeps the fixed schedules (--pivots, --repeats) to compare them, so a budget "
                         "would change what it measures; use select --budget to spend a budget per decision",
}


def uses(path: str) -> frozenset[str]:
    """The settings the command ``path`` reads (every setting for a command not in :data:`USES`)."""
    return USES.get(path, _EVERY)


def refuse_unused(path: str, flags: Mapping[str, Any]) -> None:
    """One sentence for the first flag in ``flags`` (setting -> value) that the command ``path`` does not read."""
    for name in flags:
        if name in SPEC and name not in uses(path):
            spec = SPEC[name]
            why = _WHY.get((path, name)) or f"{path} never uses the {name} setting"
            sources = " and ".join(filter(None, [f"${spec.env}" if spec.env else None,
                                                 f"the config file's {spec.file}" if spec.file else None]))
            tail = f" ({sources} stay global: they are not refused)" if sources else ""
            raise UserError(f"{spec.flag} does not apply to {path}: {why}; drop the flag{tail}")
