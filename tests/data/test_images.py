"""Issue 34: an image an input names, read, checked and resized (veriscale.data.images.load_image)."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest
from PIL import Image

from veriscale import settings
from veriscale.data.images import ImageRef, load_image, load_images
from veriscale.data.reader import BadInput
from veriscale.errors import settings_in


def png(path: Path, size: tuple[int, int], colour: tuple[int, int, int] = (200, 30, 30)) -> Path:
    Image.new("RGB", size, colour).save(path, "PNG")
    return path


def size_of(data: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(data)) as image:
        return image.size


def test_a_large_image_is_shrunk_to_max_side_keeping_its_aspect(tmp_path: Path) -> None:
    settings.choose({"image_max_side": 50})
    part = load_image(ImageRef(str(png(tmp_path / "wide.png", (200, 100))), label="wide"))
    assert (part.width, part.height) == (50, 25) == size_of(part.data)
    assert part.mime == "image/png" and part.resize == "max_side=50" and part.label == "wide"


def test_a_png_within_the_limits_is_sent_as_it_is(tmp_path: Path) -> None:
    path = png(tmp_path / "small.png", (40, 30))
    part = load_image(ImageRef(str(path)))
    assert part.data == path.read_bytes() and (part.width, part.height) == (40, 30)
    assert part.label == str(path) and part.source == str(path)
    assert part.data_url().startswith("data:image/png;base64,")


def test_an_image_over_image_max_mb_names_the_setting(tmp_path: Path) -> None:
    path = png(tmp_path / "big.png", (300, 300))
    settings.choose({"image_max_mb": 0.0001})
    with pytest.raises(BadInput) as err:
        load_image(ImageRef(str(path)))
    assert "image limit" in str(err.value) and "\n" not in str(err.value)
    assert settings_in(err.value.template) == ["image_max_mb"]
    data_url = "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()
    with pytest.raises(BadInput) as err:
        load_image(ImageRef(data_url))
    assert settings_in(err.value.template) == ["image_max_mb"]


def test_a_data_url_reads_like_the_file(tmp_path: Path) -> None:
    path = png(tmp_path / "shot.png", (20, 10))
    data_url = "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()
    from_url, from_file = load_images([ImageRef(data_url), ImageRef(str(path))])
    assert from_url.key() == from_file.key() and from_url.source == ""
    assert ImageRef(data_url).name() == "an inline image"
    with pytest.raises(BadInput, match="is not a base64 image"):
        load_image(ImageRef("data:text/plain,hello"))


def test_a_file_that_is_no_image_is_one_sentence(tmp_path: Path) -> None:
    notes = tmp_path / "notes.png"
    notes.write_text("not an image, just text\n")
    with pytest.raises(BadInput) as err:
        load_image(ImageRef(str(notes)))
    text = str(err.value)
    assert "notes.png' cannot be read as an image" in text and "give a PNG, JPEG" in text and "\n" not in text
    with pytest.raises(BadInput, match="does not exist"):
        load_image(ImageRef(str(tmp_path / "missing.png")))


def test_the_key_sees_the_bytes_and_the_resize_never_the_path(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    one = png(tmp_path / "a" / "one.png", (300, 200))
    two = tmp_path / "elsewhere.png"
    two.write_bytes(one.read_bytes())
    assert load_image(ImageRef(str(one))).key() == load_image(ImageRef(str(two), label="other")).key()
    settings.choose({"image_max_side": 100})
    small = load_image(ImageRef(str(one)))
    settings.choose({"image_max_side": 64})
    smaller = load_image(ImageRef(str(one)))
    assert small.key() != smaller.key() and small.key()["resize"] == "max_side=100"
    assert (small.width, small.height) == (100, 67) and (smaller.width, smaller.height) == (64, 43)


def test_bytes_in_memory_are_read_like_a_file(tmp_path: Path) -> None:
    path = png(tmp_path / "frame.png", (16, 16))
    part = load_image(ImageRef(source="clip.mp4", label="frame 1 at 0.00 s", data=path.read_bytes(), at_s=0.0))
    assert part.label == "frame 1 at 0.00 s" and part.at_s == 0.0 and part.shown()["at_s"] == 0.0
    assert part.key() == load_image(ImageRef(str(path))).key()
