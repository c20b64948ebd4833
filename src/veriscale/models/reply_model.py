"""Whether a reply answers the model that was asked for, and what a reply naming another one is.

Shared by the OpenAI-compatible and the Anthropic backends::

    same_model("gpt-4o", "gpt-4o-2024-08-06")      # True: a dated snapshot of the name asked
    same_model("qwen3-8b", "llama-3-8b")            # False: another model answered
    mode = backend.model_mismatch or model_mismatch_mode()    # "fail" (default) or "note"
    raise ModelCallError(mismatch_sentence(base_url, asked, answered, note=False))
"""

from __future__ import annotations

import logging

from veriscale import settings
from veriscale.errors import setting

LOG = logging.getLogger("veriscale.models.replies")
#: what a reply naming another model than the one asked is: "fail" (a failed call) or "note" (scored, noted)
MODEL_MISMATCH_MODES = ("fail", "note")
MODEL_MISMATCH_ENV = "VERISCALE_MODEL_MISMATCH"


def model_mismatch_mode() -> str:
    """What a reply naming another model is: the command's ``--model-mismatch`` or the file's
    ``scoring.model_mismatch``, else ``$VERISCALE_MODEL_MISMATCH``, else "fail"."""
    return str(settings.value("model_mismatch"))


def _alias_base(name: str) -> str:
    for tail in ("-latest", ":latest"):
        if name.endswith(tail):
            return name[: -len(tail)]
    return name


def same_model(asked: str | None, answered: object) -> bool:
    """Whether a reply naming ``answered`` answers a request for ``asked``: the same name; a dated
    snapshot of it (OpenAI answers "gpt-4o" with "gpt-4o-2024-08-06", Anthropic "claude-sonnet-4-5"
    with "claude-sonnet-4-5-20250929", a "-latest" alias with the snapshot it stands for); Ollama's
    ":latest" tag; or nothing to compare (no model asked: the server's default; no model named)."""
    if not asked or not isinstance(answered, str) or not answered.strip():
        return True
    answered = answered.strip()
    if answered == asked or _alias_base(answered) == _alias_base(asked):
        return True
    return answered.startswith(_alias_base(asked) + "-")


def mismatch_sentence(where: str, asked: str, answered: str, *, note: bool) -> str:
    """The one sentence a reply naming another model gets: a failed call's reason, or a note."""
    if note:
        return (f"{where} answered with model '{answered}' although '{asked}' was asked: its replies are scored "
                f"as {asked}'s ({setting('model_mismatch', 'note')})")
    return (f"{where} answered with model '{answered}' although '{asked}' was asked: the reply is not scored, it may "
            f"come from other weights than the ones named (a proxy or router that swapped the model); set "
            f"{setting('model_mismatch', 'note')} to accept it")


__all__ = ["LOG", "MODEL_MISMATCH_ENV", "MODEL_MISMATCH_MODES", "mismatch_sentence", "model_mismatch_mode",
           "same_model"]
