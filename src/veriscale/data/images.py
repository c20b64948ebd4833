"""Images a verdict sees: where an input names one (:class:`ImageRef`) and the bytes sent (:class:`ImagePart`).

An input names an image by a path, a ``data:`` URL, or bytes already in memory (a decoded video
frame). :func:`load_image` reads it through the one input reader (its binary mode), refuses one over
the ``image_max_mb`` setting, decodes it with Pillow and shrinks it so its longer side is at most
``image_max_side`` pixels (0: sent as read), re-encoded as PNG. The part sent keeps the bytes
after resizing and the resize setting; those, never the path, are what a cache key sees::

    ref = ImageRef("shots/step-3.png", label="step 3")
    part = load_image(ref)              # ImagePart(mime='image/png', width=..., height=..., ...)
    part.key()                          # {'sha256': '…', 'mime': 'image/png', 'resize': 'max_side=1024'}
    part.data_url()                     # 'data:image/png;base64,…' (what an OpenAI image_url carries)
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from veriscale import settings
from veriscale.data.reader import BadInput, read_bytes
from veriscale.errors import UserError, setting

#: image formats a vision server takes as they are; anything else Pillow reads is re-encoded as PNG
_SENT_AS_IS = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}
_DATA_URL = re.compile(r"^data:(?P<mime>image/[\w.+-]+)?(?:;[\w=.+-]+)*?;base64,(?P<b64>.*)$", re.S)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp", ".tif", ".tiff")


@dataclass(frozen=True)
class ImageRef:
    """An image as an input names it, not yet read: ``source`` (a path or a ``data:`` URL) or
    ``data`` (bytes in memory, e.g. a decoded video frame). ``label`` is what it is called where it
    is shown ("frame 3 at 1.20 s"); ``at_s``, its time in a video or a run, where known."""

    source: str = ""
    label: str = ""
    data: bytes | None = field(default=None, repr=False)
    at_s: float | None = None

    def name(self) -> str:
        """What a message calls it: its label, else its path (a data URL is just "an inline image")."""
        if self.label:
            return self.label
        if self.source and not self.source.startswith("data:"):
            return self.source
        return "an inline image"

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: the source and label (bytes in memory are named, not copied)."""
        d: dict[str, Any] = {"source": self.source or ("(in memory)" if self.data is not None else ""),
                             "label": self.label}
        if self.at_s is not None:
            d["at_s"] = self.at_s
        return d


@dataclass(frozen=True)
class ImagePart:
    """An image ready to send: its bytes after resizing, their type and size, and the resize setting."""

    data: bytes = field(repr=False)
    mime: str
    width: int
    height: int
    label: str = ""
    resize: str = ""
    source: str = ""  # where it was read from, for showing only (never in a key)
    at_s: float | None = None
    #: the prompt section it is shown in ("Task", "First response"), set by the prompt that places it;
    #: for showing only: never in a key, the prompt text or equality
    section: str = field(default="", compare=False)

    @cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def key(self) -> dict[str, Any]:
        """What a cache key sees of this image: the bytes' digest, their type and the resize setting."""
        return {"sha256": self.sha256, "mime": self.mime, "resize": self.resize}

    def data_url(self) -> str:
        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode('ascii')}"

    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")

    def placeholder(self) -> str:
        """How the image stands in a text rendering of the prompt (token counts, logs, text-only views)."""
        return f"[image: {self.label or self.sha256[:12]}, {self.width}x{self.height}]"

    def shown(self) -> dict[str, Any]:
        """What a verdict records of an image it used (no bytes): label, source, size, digest, time."""
        d: dict[str, Any] = {"label": self.label, "source": self.source, "width": self.width,
                             "height": self.height, "sha256": self.sha256}
        if self.at_s is not None:
            d["at_s"] = self.at_s
        return d


@dataclass(frozen=True)
class ImageSettings:
    """How images are read: ``max_bytes`` an input may have, ``max_side`` pixels (0: no resize)."""

    max_bytes: int
    max_side: int

    @classmethod
    def current(cls) -> "ImageSettings":
        """The ``image_max_mb`` and ``image_max_side`` settings (flag, environment, config file, default)."""
        return cls(max_bytes=max(1, round(float(settings.value("image_max_mb")) * (1 << 20))),
                   max_side=int(settings.value("image_max_side")))

    def resize_tag(self) -> str:
        return f"max_side={self.max_side}" if self.max_side else "max_side=none"


def _raw(ref: ImageRef, limits: ImageSettings) -> bytes:
    what = f"image {ref.name()!r}"
    if ref.data is not None:
        raw = ref.data
    elif ref.source.startswith("data:"):
        m = _DATA_URL.match(ref.source)
        if not m:
            raise BadInput(f"the data URL of {what} is not a base64 image (data:image/...;base64,...): "
                           "give the image as a file or a base64 data URL")
        if len(m["b64"]) * 3 // 4 > limits.max_bytes + 3:
            raise _over(what, len(m["b64"]) * 3 // 4, limits)
        try:
            raw = base64.b64decode(m["b64"], validate=False)
        except (binascii.Error, ValueError):
            raise BadInput(f"the data URL of {what} is not valid base64: re-encode the image") from None
    elif ref.source:
        try:
            raw = read_bytes(ref.source, "image", max_bytes=limits.max_bytes,
                             fix="give an image file (PNG, JPEG, WebP or GIF)")
        except BadInput as exc:  # over the cap: the image limit is what the user can raise
            if exc.reason != "too large":
                raise
            raise _over(what, os.stat(ref.source).st_size, limits) from None
    else:
        raise BadInput("an image names neither a file nor data: give its path or a data URL")
    if len(raw) > limits.max_bytes:
        raise _over(what, len(raw), limits)
    return raw


def _over(what: str, size: int, limits: ImageSettings) -> BadInput:
    return BadInput(f"{what} is {size / (1 << 20):.1f} MiB, over the {limits.max_bytes / (1 << 20):.1f} MiB "
                    f"image limit: shrink it, or raise {setting('image_max_mb')}", "too large")


def vision_extra(package: str) -> UserError:
    """The sentence for a missing optional package of the ``vision`` extra."""
    return UserError(f"reading images and video needs {package}, which is not installed: "
                     "pip install 'veriscale[vision]'")


def _pillow() -> tuple[Any, Any]:
    try:
        from PIL import Image, UnidentifiedImageError
    except ImportError:
        raise vision_extra("Pillow") from None
    return Image, UnidentifiedImageError


def load_image(ref: ImageRef, limits: ImageSettings | None = None) -> ImagePart:
    """The image ``ref`` names, read, checked and resized the way ``limits`` (default: the settings) say."""
    Image, UnidentifiedImageError = _pillow()
    limits = limits or ImageSettings.current()
    raw = _raw(ref, limits)
    what = f"image {ref.name()!r}"
    try:
        with Image.open(io.BytesIO(raw)) as img:
            img.load()
            fmt = img.format or ""
            width, height = img.size
            too_big = bool(limits.max_side) and max(width, height) > limits.max_side
            if fmt in _SENT_AS_IS and not too_big:
                data, mime = raw, _SENT_AS_IS[fmt]
            else:
                if too_big:
                    img.thumbnail((limits.max_side, limits.max_side))
                width, height = img.size
                out = io.BytesIO()
                (img if img.mode in ("RGB", "RGBA", "L", "LA") else img.convert("RGBA")).save(out, "PNG")
                data, mime = out.getvalue(), "image/png"
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
        raise BadInput(f"{what} cannot be read as an image ({type(exc).__name__}): give a PNG, JPEG, "
                       "WebP or GIF file") from None
    return ImagePart(data=data, mime=mime, width=width, height=height, label=ref.label or ref.name(),
                     resize=limits.resize_tag(), source=ref.source if not ref.source.startswith("data:") else "",
                     at_s=ref.at_s)


def load_images(refs: list[ImageRef] | tuple[ImageRef, ...], limits: ImageSettings | None = None
                ) -> tuple[ImagePart, ...]:
    """:func:`load_image` of each, in order (the settings read once)."""
    limits = limits or (ImageSettings.current() if refs else None)
    return tuple(load_image(r, limits) for r in refs)


__all__ = ["IMAGE_SUFFIXES", "ImagePart", "ImageRef", "ImageSettings", "load_image", "load_images"]
