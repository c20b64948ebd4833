"""Every setting's flag on every command: the global options (the app callback's) are accepted
after the sub-command too, and a flag whose setting the command never reads is refused in one
sentence (:func:`veriscale.cli.settings.refuse_unused`).

:func:`install` wraps each registered command once: its signature gets the callback's options
(hidden, same flags, same types) and a hidden option for every other setting's flag it lacks;
the wrapper refuses the unused ones, then resolves the global flags again with those given after
the sub-command over those given before it (the same rule, flag > environment > file > default)::

    veriscale --joint compare task.md a.md b.md      # as before
    veriscale compare task.md a.md b.md --joint      # the same settings
    veriscale race --budget calls=9 -- make test     # error: --budget does not apply to race: ...
"""

from __future__ import annotations

import functools
import inspect
import typing
from copy import copy
from typing import Any, Callable, List, Optional

import typer

from veriscale.cli.common import note
from veriscale.settings.registry import SPECS

PREFIX = "setting__"  # the python names of the added parameters (never a command's own)
#: the app callback's parameter names that differ from their setting's name
CALLBACK_NAMES = {"deadline": "deadline_s", "store_wait": "store_wait_s"}


def setting_flags(params: dict[str, Any]) -> dict[str, Any]:
    """The callback's keyword values (``deadline=30``) as settings (``deadline_s=30``), ``config`` left out."""
    return {CALLBACK_NAMES.get(name, name): value for name, value in params.items() if name != "config"}


def _flags_of(func: Callable[..., Any]) -> set[str]:
    """The option flags a command function declares (``--model``, ``-m``, ``--no-redact``...)."""
    found: set[str] = set()
    for param in inspect.signature(func, eval_str=True).parameters.values():
        infos = [param.default, *getattr(param.annotation, "__metadata__", ())]
        for info in infos:
            if isinstance(info, typer.models.OptionInfo):
                for decl in [getattr(info, "default", None), *(info.param_decls or ())]:
                    if isinstance(decl, str):
                        found.update(part for part in decl.split("/") if part.startswith("-"))
    return found


def _hidden(info: Any) -> Any:
    info = copy(info)
    info.hidden = True
    return info


def _extra_parameters(callback: Callable[..., Any], own: set[str]) -> list[inspect.Parameter]:
    """The callback's options and the other settings' flags that a command with flags ``own`` lacks."""
    hints = typing.get_type_hints(callback, include_extras=True)
    extra: list[inspect.Parameter] = []
    global_flags: set[str] = set()
    for param in inspect.signature(callback).parameters.values():
        flags = set(_flags_of_option(param.default))
        global_flags |= flags
        if flags & own:
            continue
        extra.append(inspect.Parameter(PREFIX + param.name, inspect.Parameter.KEYWORD_ONLY,
                                       default=_hidden(param.default), annotation=hints[param.name]))
    for spec in SPECS:
        if spec.flag is None or spec.flag in own or spec.flag in global_flags:
            continue
        if spec.name == "redact_secrets":  # --no-redact: a switch
            default, annotation = typer.Option(False, spec.flag, hidden=True), bool
        elif spec.name in ("redact", "model"):
            default, annotation = typer.Option(None, spec.flag, hidden=True), Optional[List[str]]
        else:
            default, annotation = typer.Option(None, spec.flag, hidden=True), Optional[str]
        extra.append(inspect.Parameter(PREFIX + spec.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                       annotation=annotation))
    return extra


def _flags_of_option(info: Any) -> list[str]:
    decls = [d for d in (info.param_decls or ()) if isinstance(d, str)] if isinstance(info, typer.models.OptionInfo) else []
    return [part for decl in decls for part in decl.split("/") if part.startswith("-")]


def wrap(func: Callable[..., Any], path: str, callback: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` (the command ``path``, e.g. "runs list") taking every setting's flag too."""
    extra = _extra_parameters(callback, _flags_of(func))
    callback_names = set(inspect.signature(callback).parameters)
    signature = inspect.signature(func, eval_str=True)
    params = list(signature.parameters.values())
    keyword = [p for p in params if p.kind is inspect.Parameter.VAR_KEYWORD]
    plain = [p for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD]
    new_signature = signature.replace(parameters=[*plain, *extra, *keyword])
    hints = typing.get_type_hints(func, include_extras=True)

    @functools.wraps(func)
    def command(*args: Any, **kwargs: Any) -> Any:
        from veriscale.cli import settings
        from veriscale.cli.common import user_errors

        given: dict[str, Any] = {}
        for param in extra:
            value = kwargs.pop(param.name)
            if value is None or value is False or value == [] or value == ():
                continue
            given[param.name.removeprefix(PREFIX)] = value
        config = given.pop("config", None)
        after = {(CALLBACK_NAMES.get(name, name) if name in callback_names else name): value
                 for name, value in given.items()}
        if "redact_secrets" in after:
            after["redact_secrets"] = False  # --no-redact
        with user_errors():
            settings.refuse_unused(path, {**settings.given_flags(), **after})
            if after or config is not None:
                settings.reconfigure(config, after)
            for text in settings.take_notes():  # the config file's note, unless --quiet (before or after the sub-command)
                note(text)
        return func(*args, **kwargs)

    command.__signature__ = new_signature  # type: ignore[attr-defined]
    command.__annotations__ = {**hints, **{p.name: p.annotation for p in extra}}
    del command.__wrapped__  # typer reads the signature above, not the wrapped function's
    return command


def install(app: typer.Typer, callback: Callable[..., Any], path: str = "") -> None:
    """Wrap every command registered on ``app`` and its sub-apps (see :func:`wrap`)."""
    for info in app.registered_commands:
        name = info.name or info.callback.__name__.replace("_", "-")
        info.callback = wrap(info.callback, f"{path} {name}".strip(), callback)
    for group in app.registered_groups:
        install(group.typer_instance, callback, f"{path} {group.name}".strip())
