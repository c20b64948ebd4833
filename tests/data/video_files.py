"""Small videos for the frame tests, written by PyAV itself (no fixture files, no mocks).

    make_video(tmp_path / "clip.mp4")                 # 64x48, 3 s at 10 fps: red, then green, then blue
    make_video(path, fps=100, key_every=10)           # a key frame every 10 frames
"""

from __future__ import annotations

from pathlib import Path

RED, GREEN, BLUE = (255, 0, 0), (0, 255, 0), (0, 0, 255)
COLOURS = (RED, GREEN, BLUE)


def _codec() -> str:
    import av

    return "libx264" if "libx264" in av.codecs_available else "mpeg4"


def make_video(path: Path, seconds: int = 3, fps: int = 10, key_every: int | None = None,
               size: tuple[int, int] = (64, 48), colours: tuple[tuple[int, int, int], ...] = COLOURS) -> Path:
    """A video whose frames are one flat colour per second (``colours`` in turn)."""
    import av
    import numpy as np

    codec = _codec()
    width, height = size
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        gop = key_every or 10_000  # no key_every: one key frame, at the start
        stream.codec_context.gop_size = gop
        if codec == "libx264":
            # x264 reads its own settings only through x264-params (keyint= etc. as options are ignored)
            stream.options = {"preset": "ultrafast", "x264-params": f"keyint={gop}:min-keyint={gop}:scenecut=0"}
        for i in range(seconds * fps):
            pixels = np.zeros((height, width, 3), np.uint8)
            pixels[:] = colours[(i // fps) % len(colours)]
            frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
            frame.pts = i
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def colour_of(png: bytes) -> tuple[int, int, int]:
    """The flat colour nearest a frame's centre pixel (RED, GREEN or BLUE)."""
    import io

    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        pixel = image.convert("RGB").getpixel((image.width // 2, image.height // 2))
    return min(COLOURS, key=lambda c: sum(abs(a - b) for a, b in zip(c, pixel)))
