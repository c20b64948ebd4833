"""What a backend without vision says when a prompt carries images.

The embedded SmolLM2 reads text only; a prompt with images (``Message.parts``) or chat content with
``image_url`` parts is refused in one sentence that names what to point the model setting at::

    refuse_images_if_any(request.messages, "the embedded model")     # raises UserError with images
    chat_has_images([{"role": "user", "content": [{"type": "image_url", ...}]}])   # True
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from veriscale.errors import UserError, setting
from veriscale.models.base import Message, has_images

#: what to point the model setting at for images
VISION_SERVERS = ("a llama.cpp server started with a multimodal projector (llama-server -m MODEL.gguf "
                  "--mmproj MMPROJ.gguf), or vLLM serving a vision-language model")


def no_vision(who: str) -> UserError:
    """The one sentence for a backend that cannot see images."""
    return UserError(f"{who} has no vision and cannot judge images or video frames: set {setting('model')} to "
                     f"{VISION_SERVERS}")


def chat_has_images(messages: Sequence[dict[str, Any]]) -> bool:
    """Whether Chat Completions messages carry an image content part."""
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list) and any(isinstance(p, dict) and p.get("type") in ("image_url", "image")
                                             for p in content):
            return True
    return False


def require_vision(model: Any, images: bool) -> None:
    """Refuse, before any call is planned, images for a model that cannot see them (the embedded one)."""
    if images and getattr(model, "is_embedded", False):
        raise no_vision("the embedded model (SmolLM2-135M, text only)")


def refuse_images_if_any(messages: Iterable[Message], who: str) -> None:
    """Raise :func:`no_vision` when any message carries an image."""
    if has_images(messages):
        raise no_vision(who)


__all__ = ["VISION_SERVERS", "chat_has_images", "no_vision", "refuse_images_if_any", "require_vision"]
