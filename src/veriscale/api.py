"""One-call verdicts: ``score``, ``compare`` (and their async forms) without building a ``Verifier`` first.

    from veriscale import compare, score

    task = "Print the number of lines in notes.txt."
    s = score(task, "wc -l < notes.txt")                  # embedded model, criteria "general"
    s.reward, s.criteria["Correctness"]["label_probs"]   # reward in [0, 1]; per-label probabilities
    c = compare(task, "wc -l < notes.txt", "cat notes.txt", model="http://127.0.0.1:8000/v1#m")
    c.p_a_wins, c.reward_a, c.reward_b

Each call builds a ``Verifier`` (``veriscale.verify.reward``) from the same settings as the
``veriscale score`` / ``compare`` commands. ``model`` is a model URI (see
``veriscale.models.uri``) or a backend object; ``criteria`` a built-in set name, a Markdown file
path or a ``CriteriaSet``. Nothing is written to disk unless ``store`` names a store file (or
passes a ``Store``); with one, a repeated call is answered from it. A verdict whose model calls
failed has ``failed`` set, ``reward`` (or ``p_a_wins``) None and ``errors`` saying why.

A verdict from the embedded model (the default) warns once with
``veriscale.models.weak_judge.WeakJudgeWarning``, as the CLI notes it: a 135M model is a weak
judge; pass ``model=`` a served model for real verification.

From async code (a server, an agent loop) await the same verdicts; the model calls run on the
gateway's loop, so the caller's loop keeps serving, and ``score``/``compare`` are thin wrappers
over these::

    s = await ascore(task, "wc -l < notes.txt")
    c = await acompare(task, a, b, store="runs.sqlite3")
    sel = await aselect(task, candidates, verifier=v)      # veriscale.selection.select.select, awaited
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from veriscale.data.images import ImagePart, ImageRef, load_images
from veriscale.engine import sync_edge
from veriscale.engine.store import Store
from veriscale.errors import UserError
from veriscale.models.abilities import aclose_backend
from veriscale.models.base import ModelBackend
from veriscale.models.uri import load_backend
from veriscale.models.weak_judge import warn_if_embedded
from veriscale.verify.criteria import CriteriaSet
from veriscale.verify.results import CompareResult, ScoreResult
from veriscale.verify.reward import Verifier
from veriscale.verify.scale import Scale

ModelLike = str | ModelBackend
StoreLike = Store | str | os.PathLike[str] | None
#: images by section ("task", "candidate"; or "task", "a", "b"): paths, data URLs or ImageRefs, in order
ImagesLike = Mapping[str, Sequence["ImageRef | str | os.PathLike[str]"]] | None
T = TypeVar("T")

__all__ = ["acompare", "ascore", "aselect", "compare", "score"]


def _backend(model: ModelLike) -> ModelBackend:
    if isinstance(model, str):
        return load_backend(model)
    if callable(getattr(model, "score", None)) and callable(getattr(model, "fingerprint", None)):
        return model
    raise UserError(f"model must be a model URI such as 'embedded' or a backend object, not {type(model).__name__}: "
                    "pass e.g. model='http://127.0.0.1:8000/v1#my-model'")


def _store(store: StoreLike) -> Store | None:
    if store is None or isinstance(store, Store):
        return store
    if isinstance(store, (str, os.PathLike)):
        return Store.open(store)
    raise UserError(f"store must be a file path or a Store, not {type(store).__name__}: pass e.g. store='runs.sqlite3'")


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        hint = " (read the file first, e.g. Path(p).read_text())" if isinstance(value, os.PathLike) else ""
        raise UserError(f"the {what} must be text (a str), not {type(value).__name__}: pass its text{hint}")
    return value


def _images(images: ImagesLike, keys: tuple[str, ...]) -> dict[str, tuple[ImagePart, ...]] | None:
    """``images`` (section -> paths, data URLs or ImageRefs) read, checked and resized for the judge."""
    if not images:
        return None
    unknown = sorted(set(images) - set(keys))
    if unknown:
        raise UserError(f"images names {', '.join(map(repr, unknown))}: give images for {', '.join(keys)}")
    return {what: load_images([r if isinstance(r, ImageRef) else ImageRef(str(r)) for r in refs])
            for what, refs in images.items()}


async def _with_verifier(model: ModelLike, store: StoreLike, settings: dict[str, Any],
                         verdict: Callable[[Verifier], Awaitable[T]]) -> T:
    """Build the Verifier (loading a model off the loop), take the verdict, and close what was opened
    here: the store, and a server backend loaded from a URI (the embedded model is the process's one
    instance, shared, so it stays loaded)."""
    backend = await asyncio.to_thread(_backend, model) if isinstance(model, str) else _backend(model)
    warn_if_embedded(backend, stacklevel=2)  # as the CLI's note: the embedded model is a weak judge
    opened = _store(store)
    try:
        return await verdict(Verifier(backend, store=opened, **settings))
    finally:
        if opened is not None and opened is not store:
            await asyncio.to_thread(opened.close)
        if isinstance(model, str) and not backend.is_embedded:
            await aclose_backend(backend)


def score(task: str, candidate: str, *, model: ModelLike = "embedded", criteria: CriteriaSet | str = "general",
          scale: Scale | str = "letters", repeats: int | None = None, reasoning: bool = False,
          discrete: bool = False, seed: int = 0, store: StoreLike = None, max_calls: int | None = None,
          concurrency: int = 4, images: ImagesLike = None) -> ScoreResult:
    """Pointwise reward of ``candidate`` for ``task``, in [0, 1] (one call per criterion and repeat).

        r = score("Say hi.", "hi", criteria="general")
        r.reward, r.criteria["Correctness"]["reward"], r.usage.model_calls   # ..., ..., 3
        score("Stack the cubes.", "3 frames", model=VLM, images={"candidate": ["f1.png", "f2.png", "f3.png"]})
    """
    return sync_edge.run(ascore(task, candidate, model=model, criteria=criteria, scale=scale, repeats=repeats,
                           reasoning=reasoning, discrete=discrete, seed=seed, store=store, max_calls=max_calls,
                           concurrency=concurrency, images=images))


async def ascore(task: str, candidate: str, *, model: ModelLike = "embedded", criteria: CriteriaSet | str = "general",
                 scale: Scale | str = "letters", repeats: int | None = None, reasoning: bool = False,
                 discrete: bool = False, seed: int = 0, store: StoreLike = None, max_calls: int | None = None,
                 concurrency: int = 4, images: ImagesLike = None) -> ScoreResult:
    """:func:`score`, awaited: ``r = await ascore("Say hi.", "hi")``."""
    task, candidate = _text(task, "task"), _text(candidate, "candidate")
    shown = await asyncio.to_thread(_images, images, ("task", "candidate"))
    settings = dict(scale=scale, criteria=criteria, repeats=repeats, reasoning=reasoning, discrete=discrete,
                    seed=seed, max_calls=max_calls, concurrency=concurrency)
    return await _with_verifier(model, store, settings, lambda v: v.ascore(task, candidate, images=shown))


def compare(task: str, a: str, b: str, *, model: ModelLike = "embedded", criteria: CriteriaSet | str = "general",
            scale: Scale | str = "letters", repeats: int | None = None, reasoning: bool = False,
            discrete: bool = False, seed: int = 0, tau: float | None = None, store: StoreLike = None,
            max_calls: int | None = None, concurrency: int = 4, images: ImagesLike = None) -> CompareResult:
    """Both candidates judged in one context: their rewards and P(a beats b) (``images``: what the task,
    ``a`` and ``b`` show, keys "task", "a" and "b"; each run's images move with it when the order swaps).

    ``tau`` overrides the model's calibrated temperature in P = sigmoid((R_a - R_b) / tau).
    Repeats alternate which candidate is shown first (default K = 2, both orders)::

        c = compare("Say hi.", "hi", "bye", store="runs.sqlite3")   # rerun: answered from the store
        c.p_a_wins, c.reward_a, c.reward_b, c.criteria["Correctness"]["label_probs"]["a"]
    """
    return sync_edge.run(acompare(task, a, b, model=model, criteria=criteria, scale=scale, repeats=repeats,
                             reasoning=reasoning, discrete=discrete, seed=seed, tau=tau, store=store,
                             max_calls=max_calls, concurrency=concurrency, images=images))


async def acompare(task: str, a: str, b: str, *, model: ModelLike = "embedded", criteria: CriteriaSet | str = "general",
                   scale: Scale | str = "letters", repeats: int | None = None, reasoning: bool = False,
                   discrete: bool = False, seed: int = 0, tau: float | None = None, store: StoreLike = None,
                   max_calls: int | None = None, concurrency: int = 4, images: ImagesLike = None) -> CompareResult:
    """:func:`compare`, awaited: ``c = await acompare("Say hi.", "hi", "bye")``."""
    task, a, b = _text(task, "task"), _text(a, "candidate A"), _text(b, "candidate B")
    shown = await asyncio.to_thread(_images, images, ("task", "a", "b"))
    settings = dict(scale=scale, criteria=criteria, repeats=repeats, reasoning=reasoning, discrete=discrete,
                    seed=seed, tau=tau, max_calls=max_calls, concurrency=concurrency)
    return await _with_verifier(model, store, settings, lambda v: v.acompare(task, a, b, images=shown))


async def aselect(task: Any, candidates: Any, *, verifier: Verifier, **options: Any) -> Any:
    """``veriscale.select`` awaited (same arguments): planned in a worker thread, then every model
    call of the tournament awaited on the caller's loop, which keeps serving meanwhile::

        sel = await aselect(None, candidates, verifier=Verifier(load_backend("embedded")))
        sel.best.id
    """
    from veriscale.selection.select import aselect as aselect_on_loop

    warn_if_embedded(verifier.model, stacklevel=2)
    return await aselect_on_loop(task, candidates, verifier=verifier, **options)
