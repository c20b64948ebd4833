"""A candidate given on the command line that is images, not text: an image file, a video, or a
folder of frames (``veriscale score task.md run-1.mp4``, ``compare task.md runs/a runs/b``)::

    text, refs = read_candidate_input("run-1.mp4", "candidate A")   # ('video run-1.mp4 (2.40 s): 8 frames: ...', [ImageRef, ...])
    text, refs = read_candidate_input("answer.md", "candidate")     # (its text, [])

The text names what the images are (a frame count and the first and last names), so every text
path still has text; the images are the frames in order (the ``frames`` setting for a video).
"""

from __future__ import annotations

from pathlib import Path

from veriscale.data.images import IMAGE_SUFFIXES, ImageRef
from veriscale.data.text_input import read_text_input


def is_visual(source: str) -> bool:
    """Whether ``source`` names images rather than text: a folder, a video or an image file."""
    from veriscale.data.video import VIDEO_SUFFIXES

    if source == "-":
        return False
    path = Path(source)
    return path.is_dir() or path.suffix.lower() in (*VIDEO_SUFFIXES, *IMAGE_SUFFIXES)


def read_candidate_input(source: str, what: str) -> tuple[str, list[ImageRef]]:
    """The text and the images behind ``source`` (a text file or ``-``: its text and no images)."""
    if not is_visual(source):
        return read_text_input(source, what), []
    path = Path(source)
    if path.suffix.lower() in IMAGE_SUFFIXES and not path.is_dir():
        return f"image {path.name}", [ImageRef(str(path), label=path.name)]
    from veriscale.data.importers import frames

    (candidate,) = frames.load(path)
    return candidate.text, list(candidate.images)


__all__ = ["is_visual", "read_candidate_input"]
