"""Model backends by URI scheme: each backend module registers the schemes it reads.

A scheme is the text before the first ``:`` of a model URI (``openai`` in ``openai:gpt-4.1``),
or the whole URI when it has none (``embedded``). Registering one takes a parse function from
the full URI to a backend, and the forms shown in help and error messages::

    from veriscale.models.registry import register_backend

    def from_uri(uri: str) -> ModelBackend:        # "mybackend:some-model"
        return MyBackend(uri.split(":", 1)[1])

    register_backend(("mybackend",), from_uri, forms=("mybackend:<model>",))

A new backend is one module that defines its backend and calls ``register_backend`` when
imported. ``veriscale.models.uri.load_backend`` looks the scheme up here; the built-in schemes
are registered by ``veriscale.models.schemes``, which ``uri`` imports.

A backend can also come from another installed distribution, through the entry point group
``veriscale.backends`` (loaded by :func:`load_plugins` the first time a URI names a scheme that
is not built in). The entry point's name is the scheme; its object is either a module that
calls ``register_backend`` when imported, or the parse function itself (its ``forms``
attribute, if any, lists its URI forms)::

    # the plugin's pyproject.toml
    [project.entry-points."veriscale.backends"]
    mybackend = "veriscale_mybackend:from_uri"
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from veriscale.errors import UserError
from veriscale.models.base import ModelBackend
from veriscale.plugins import plugins

PLUGIN_GROUP = "veriscale.backends"

ParseBackend = Callable[[str], ModelBackend]


@dataclass(frozen=True)
class BackendScheme:
    """One registered scheme: how to build its backend and how its URIs are written."""

    name: str
    parse: ParseBackend
    forms: tuple[str, ...]


SCHEMES: dict[str, BackendScheme] = {}


def register_backend(schemes: tuple[str, ...], parse: ParseBackend, *, forms: tuple[str, ...]) -> None:
    """Make ``load_backend`` build URIs of these schemes with ``parse``; the forms are listed
    once, under the first scheme. Registering a scheme again replaces it."""
    for i, name in enumerate(schemes):
        SCHEMES[name] = BackendScheme(name, parse, forms if i == 0 else ())


def scheme_of(uri: str) -> str:
    """``"openai"`` for ``"openai:gpt-4.1"``, ``"http"`` for ``"http://h/v1"``, ``"embedded"`` for
    ``"embedded?threads=2"``: the URI up to its first ``:`` (or ``?``)."""
    return uri.split(":", 1)[0].split("?", 1)[0]


def uri_forms() -> str:
    """Every registered URI form, comma-separated, in registration order."""
    return ", ".join(form for scheme in SCHEMES.values() for form in scheme.forms)


def load_plugins() -> None:
    """Register the backends of every installed ``veriscale.backends`` entry point (once a process):
    a callable ``parse(uri) -> ModelBackend`` serves the scheme named like the entry point."""
    for name, _value, loaded in plugins(PLUGIN_GROUP, "backend"):
        if not isinstance(loaded, ModuleType) and callable(loaded):
            forms = tuple(getattr(loaded, "forms", None) or (f"{name}:<model>",))
            register_backend((name,), loaded, forms=forms)


def check_scheme(uri: str) -> None:
    """A UserError listing the forms when no registered scheme (or plugin) reads ``uri``; nothing is
    loaded (a driver that hands the URI to workers checks it before any work)."""
    uri = (uri or "").strip()
    if SCHEMES.get(scheme_of(uri)) is None:
        load_plugins()
        if SCHEMES.get(scheme_of(uri)) is None:
            raise UserError(f"unknown model URI '{uri}': use one of {uri_forms()}")


def load_backend(uri: str) -> ModelBackend:
    """The backend a model URI names (the schemes registered so far, then the plugins'); an
    unknown form raises a UserError listing the forms. Use ``veriscale.models.uri.load_backend``,
    which registers the built-in schemes first."""
    uri = (uri or "").strip()
    scheme = SCHEMES.get(scheme_of(uri))
    if scheme is None:
        load_plugins()
        scheme = SCHEMES.get(scheme_of(uri))
    if scheme is None:
        raise UserError(f"unknown model URI '{uri}': use one of {uri_forms()}")
    return scheme.parse(uri)
