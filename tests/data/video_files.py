"""Small videos for the frame tests, written by PyAV itself (no fixture files, no mocks).

    make_video(tmp_path / "clip.mp4")                 # 64x48, 3 s at 10 fps: red, then green, then blue
    make_video(path, fps=100, key_every=10)           # a key frame every 10 frames
    write_video(path, 300, 30, (64, 48), 10, paint)   # paint(i, pixels) fills frame i
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

RED, GREEN, BLUE = (255, 0, 0), (0, 255, 0), (0, 0, 255)
COLOURS = (RED, GREEN, BLUE)


def _codec() -> str:
    import av

    return "libx264" if "libx264" in av.codecs_available else "mpeg4"


def write_video(path: Path, frames: int, fps: int, size: tuple[int, int], gop: int,
                paint: Callable[[int, Any], None], preset: str = "ultrafast") -> str:
    """Write ``frames`` frames at ``fps``, ``paint(i, pixels)`` filling frame i's RGB array, with a key
    frame every ``gop`` frames and none at scene cuts; returns the codec (libx264, else mpeg4)."""
    import av
    import numpy as np

    codec = _codec()
    width, height = size
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.codec_context.gop_size = gop
        if codec == "libx264":  # x264 reads its own settings only through x264-params
            stream.options = {"preset": preset, "x264-params": f"keyint={gop}:min-keyint={gop}:scenecut=0"}
        else:
            stream.options = {"sc_threshold": "1000000000"}
        for i in range(frames):
            pixels = np.zeros((height, width, 3), np.uint8)
            paint(i, pixels)
            frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
            frame.pts = i
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return codec


def make_video(path: Path, seconds: int = 3, fps: int = 10, key_every: int | None = None,
               size: tuple[int, int] = (64, 48), colours: tuple[tuple[int, int, int], ...] = COLOURS) -> Path:
    """A video whose frames are one flat colour per second (``colours`` in turn)."""

    def paint(i: int, pixels: Any) -> None:
        pixels[:] = colours[(i // fps) % len(colours)]

    write_video(path, seconds * fps, fps, size, key_every or 10_000, paint)  # no key_every: one key frame
    return path


def colour_of(png: bytes) -> tuple[int, int, int]:
    """The flat colour nearest a frame's centre pixel (RED, GREEN or BLUE)."""
    import io

    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        pixel = image.convert("RGB").getpixel((image.width // 2, image.height // 2))
    return min(COLOURS, key=lambda c: sum(abs(a - b) for a, b in zip(c, pixel)))
