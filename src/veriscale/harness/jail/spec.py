"""What a jailed session sees: :class:`JailSpec` (its folders, model endpoint, environment,
limits), checked and made absolute on construction; ``veriscale.harness.jail.sandbox`` runs it
and ``veriscale.harness.jail.mounts`` turns it into bubblewrap's mounts::

    spec = JailSpec(task_dir=Path("tasks/t1"), writable_dir=Path("tasks/t1/sessions/resolve"))
    spec.model_url()        # the model endpoint as the session sees it, or None
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from veriscale.errors import UserError
from veriscale.harness.jail.jail_relay import Tap
from veriscale.harness.jail.limits import JailLimits
from veriscale.harness.jail.netjail import Endpoint, check_endpoint, inside_model_url
from veriscale.harness.jail.relay_gate import RelayPolicy
from veriscale.harness.safe_fs import is_within, resolved
from veriscale.harness.workspace.contract import INPUTS_DIR, ROLLOUTS_DIR, SPEC_DIR

_EVIDENCE_DIRS = (SPEC_DIR, INPUTS_DIR, ROLLOUTS_DIR)


@dataclass(frozen=True)
class JailSpec:
    """What a jailed session sees; paths are resolved to absolute ones on construction.

    ``hidden`` paths are covered with an empty folder (or empty file) inside; ``readonly_extra``
    and ``writable_dir`` are mounted after them, so they may re-expose a path under a hidden
    folder (e.g. hide ``<task>/sessions`` but write into ``<task>/sessions/<name>``).
    ``model_policy`` names the model calls the session may make (anything else gets a 403 on the
    host); ``model_headers`` are added to those on the host side of the model relay (an API key
    reaches the endpoint without entering the jail) and need a policy; ``model_tap`` makes a tap
    per relayed request (the store records an external agent's calls with one).
    """

    task_dir: Path
    writable_dir: Path
    readonly_extra: Sequence[Path] = ()
    hidden: Sequence[Path] = ()
    model_endpoint: Endpoint | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    no_jail: bool = False
    limits: JailLimits = field(default_factory=JailLimits)
    model_headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    model_tap: Callable[[], Tap] | None = field(default=None, repr=False, compare=False)
    model_policy: RelayPolicy | None = None

    def __post_init__(self) -> None:
        task_dir = resolved(self.task_dir, "task folder")
        if not task_dir.is_dir():
            raise UserError(
                f"task folder '{self.task_dir}' does not exist: materialise the task first"
            )
        writable = resolved(self.writable_dir, "writable folder")
        _check_writable_dir(task_dir, writable)
        extra = tuple(resolved(p, "read-only path") for p in self.readonly_extra)
        for original, path in zip(self.readonly_extra, extra):
            if not path.exists():
                raise UserError(
                    f"read-only path '{original}' does not exist: fix the path or drop it"
                )
        cwd = writable if self.cwd is None else resolved(self.cwd, "working folder")
        if not any(is_within(cwd, root) for root in (task_dir, writable, *extra)):
            raise UserError(
                f"working folder '{self.cwd}' is not visible in the jail: pick one inside the "
                "task, the writable folder or a read-only extra"
            )
        for key, value in self.env.items():
            if not isinstance(key, str) or not isinstance(value, str) or not key or "=" in key:
                raise UserError(
                    f"jail environment entry {key!r}={value!r} is invalid: use str names and values"
                )
        object.__setattr__(self, "task_dir", task_dir)
        object.__setattr__(self, "writable_dir", writable)
        object.__setattr__(self, "readonly_extra", extra)
        object.__setattr__(self, "hidden", tuple(resolved(p, "hidden path") for p in self.hidden))
        object.__setattr__(self, "cwd", cwd)
        object.__setattr__(self, "env", dict(self.env))
        object.__setattr__(self, "model_headers", dict(self.model_headers))
        if self.model_endpoint is not None:
            object.__setattr__(self, "model_endpoint", check_endpoint(self.model_endpoint))

    def model_url(self) -> str | None:
        """Base URL of the model endpoint as the session sees it (direct when the jail is off)."""
        if self.model_endpoint is None:
            return None
        if self.no_jail:
            host, port = self.model_endpoint
            return f"http://{f'[{host}]' if ':' in host else host}:{port}"
        return inside_model_url(self.model_endpoint)



def _check_writable_dir(task_dir: Path, writable: Path) -> None:
    if is_within(task_dir, writable):
        raise UserError(
            f"writable folder '{writable}' contains the task folder: give the session its own "
            "output folder, e.g. <task>/sessions/<name>"
        )
    for name in _EVIDENCE_DIRS:
        if is_within(writable, task_dir / name):
            raise UserError(
                f"writable folder '{writable}' is inside the task's read-only '{name}/': "
                "use an output folder outside it, e.g. <task>/sessions/<name>"
            )
