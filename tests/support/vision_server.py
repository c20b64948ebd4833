"""TEST DOUBLE — a vision-language server in OpenAI's Chat Completions shape, for probe, selection and
progress tests only.

No vision model installs offline (the suite's real server, ``python -m llama_cpp.server`` on the
embedded SmolLM2, reads text only), so this stands in for one. It is a real HTTP server (stdlib
``http.server`` in a thread) on 127.0.0.1 answering ``GET /v1/models`` and ``POST
/v1/chat/completions`` with ``choices[0].logprobs.content[].top_logprobs[]`` and
``usage.prompt_tokens``; any other POST (a tokenizer, ``/v1/completions``) is answered 404::

    with VisionRecordingServer() as srv:
        srv.url                  # http://127.0.0.1:PORT/v1 (model id "vision-double")
        srv.requests             # every chat request: {"path", "body", "images": [(mime, (w, h)), ...]}
        srv.image_requests()     # those that carried an image

It decodes every ``image_url`` data URL with Pillow (a part that does not decode is answered 400,
as a vision server does). What it answers:

- **usage**: ``prompt_tokens`` = ``len(text) // 4 + IMAGE_TOKENS`` per image, where ``text`` is every
  text part and string content of the messages: an image costs the same whatever its bytes, as
  on a server with a projector.
- **the colour question** (text with :data:`veriscale.models.vision_probe.COLOUR_QUESTION`, options
  written ``A: red, B: blue``): the letter of the option whose colour is nearest the mean colour
  of the last image, with probability 0.9 (the rest spread over the other options).
- **anything else** is read as a grade: the labels come from the scale sentence of the prompt
  (letters, digits, yesno or custom labels; else A-E) and the distribution over them from
  ``grade(body, images)``, where ``images`` are the Pillow images of the section being graded
  (after ``## Response``, or ``## First response`` / ``## Second response`` for the slot the
  prompt asks about; every image of the request where that section has none). The default,
  :func:`greenness_grade`: **the greener the graded images on average** (mean green channel,
  0-255 → 0-1, 0.5 with no image), **the higher the grade**, as a bump around the label at
  that height of the scale. So a frame pool whose right answer is known is a pool of frames
  of known greenness (``solid((0, 255, 0))`` beats ``solid((0, 128, 0))`` beats ``solid((0, 0, 0))``)::

        VisionRecordingServer(grade=lambda body, images: {"A": 0.7, "B": 0.3})

With ``text_only=True`` it mimics a text-only server that takes image parts silently
(llama_cpp.server without a projector): images are not decoded or seen, the data URL counts as
text (``len(data_url) // 4`` tokens), the colour question gets ``"A"`` with probability 0.9, and a
grade sees no image (0.5).
"""

from __future__ import annotations

import base64
import io
import math
import re
import threading
from collections.abc import Callable
from typing import Any

from tests.support.json_http import JsonHandler, local_server
from veriscale.models.vision_probe import COLOUR_QUESTION

#: prompt tokens one image costs on the double, whatever its byte size
IMAGE_TOKENS = 64
MODEL_ID = "vision-double"
#: the colours the colour question may name, as RGB
PALETTE = {"red": (255, 0, 0), "green": (0, 160, 0), "blue": (0, 0, 255), "yellow": (255, 255, 0),
           "white": (255, 255, 255), "black": (0, 0, 0), "grey": (128, 128, 128), "gray": (128, 128, 128),
           "orange": (255, 140, 0), "purple": (128, 0, 128)}
_OPTION = re.compile(r"\b([A-Z]): ([a-z]+)")
_DATA_URL = re.compile(r"^data:(image/[\w.+-]+);base64,(.*)$", re.DOTALL)

Grade = Callable[[dict[str, Any], list[Any]], dict[str, float]]


def solid(rgb: tuple[int, int, int], size: tuple[int, int] = (32, 32)) -> bytes:
    """A PNG filled with one colour (for frame pools whose right answer is known)."""
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", size, rgb).save(out, "PNG")
    return out.getvalue()


def mean_rgb(image: Any) -> tuple[float, float, float]:
    """The mean colour of a Pillow image."""
    from PIL import ImageStat

    r, g, b = ImageStat.Stat(image.convert("RGB")).mean[:3]
    return (r, g, b)


def scale_labels(text: str) -> tuple[str, ...]:
    """The labels a grade prompt asks for, best first (from ``Scale.instruction()``'s sentence)."""
    if '"Yes"' in text and '"No"' in text:
        return ("Yes", "No")
    m = re.search(r"Answer with exactly one of: (.+?) \(best to worst\)", text)
    if m:
        return tuple(x.strip() for x in m[1].split(","))
    m = re.search(r"exactly one character from (\S) to (\S):", text)
    if m:
        a, b = ord(m[1]), ord(m[2])
        step = 1 if b >= a else -1
        return tuple(chr(c) for c in range(a, b + step, step))
    return tuple("ABCDE")


def bump(labels: tuple[str, ...], quality: float, width: float = 0.8) -> dict[str, float]:
    """A distribution over ``labels`` (best first) peaked at ``quality`` in [0, 1] (1: the best label)."""
    centre = (1.0 - min(1.0, max(0.0, quality))) * (len(labels) - 1)
    weights = [math.exp(-((i - centre) ** 2) / (2 * width ** 2)) for i in range(len(labels))]
    total = sum(weights)
    return {lab: w / total for lab, w in zip(labels, weights)}


def greenness_grade(body: dict[str, Any], images: list[Any]) -> dict[str, float]:
    """The default grade: the greener the graded images on average, the higher (0.5 with none)."""
    quality = sum(mean_rgb(im)[1] for im in images) / (255.0 * len(images)) if images else 0.5
    return bump(scale_labels(_all_text(body)), quality)


def _parts(body: dict[str, Any]) -> list[tuple[str, Any]]:
    """Every message's content in order as ("text", str) and ("image", url) pieces."""
    out: list[tuple[str, Any]] = []
    for m in body.get("messages") or []:
        content = m.get("content")
        if isinstance(content, str):
            out.append(("text", content))
        elif isinstance(content, list):
            for p in content:
                if p.get("type") == "text":
                    out.append(("text", str(p.get("text", ""))))
                elif p.get("type") == "image_url":
                    url = p.get("image_url")
                    out.append(("image", url.get("url") if isinstance(url, dict) else url))
    return out


def _all_text(body: dict[str, Any]) -> str:
    return "".join(v for k, v in _parts(body) if k == "text")


def _decode(url: str) -> Any:
    from PIL import Image

    m = _DATA_URL.match(url or "")
    if not m:
        raise ValueError("not a base64 image data URL")
    img = Image.open(io.BytesIO(base64.b64decode(m[2])))
    img.load()
    img.info["mime"] = m[1]
    return img


def _graded_section(text: str) -> str:
    """The section header whose images a grade reads: the slot the prompt asks about."""
    if "## First response" in text:
        tail = text.rsplit("Grade the ", 1)[-1]
        return "## Second response" if tail.startswith("second") else "## First response"
    return "## Response"


def _section_images(body: dict[str, Any], images: list[Any]) -> list[Any]:
    """The images after the graded section's header and before the next ``## `` header (all when none)."""
    pieces = _parts(body)
    section = _graded_section(_all_text(body))
    inside, picked, i = False, [], 0
    for kind, value in pieces:
        if kind == "text":
            for line in value.splitlines():
                if line.startswith("## "):
                    inside = line.startswith(section)
        else:
            if inside and i < len(images):
                picked.append(images[i])
            i += 1
    return picked or images


class VisionRecordingServer:
    def __init__(self, *, text_only: bool = False, grade: Grade | None = None,
                 image_tokens: int = IMAGE_TOKENS, model_id: str = MODEL_ID) -> None:
        self.text_only = text_only
        self.grade = grade or greenness_grade
        self.image_tokens = image_tokens
        self.model_id = model_id
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self.send_json(200, {"object": "list", "data": [{"id": server.model_id, "object": "model"}]})
                else:
                    self.send_json(404, {"error": "not found"})

            def do_POST(self) -> None:
                body = self.read_json()
                if not self.path.endswith("/chat/completions"):
                    return self.send_json(404, {"error": "not found"})
                try:
                    code, payload, seen = server.answer(body)
                except Exception as exc:  # a bug of the double: one line back, not a dropped connection
                    code, payload, seen = 500, {"error": {"message": f"double: {type(exc).__name__}: {exc}"}}, []
                with server.lock:
                    server.requests.append({"path": self.path, "body": body, "images": seen})
                self.send_json(code, payload)

        self._httpd, self.url, self._thread = local_server(Handler)
        self.port = self._httpd.server_address[1]

    def image_requests(self) -> list[dict[str, Any]]:
        """The recorded chat requests that carried at least one image part."""
        with self.lock:
            return [r for r in self.requests if any(k == "image" for k, _ in _parts(r["body"]))]

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any], list[tuple[str, tuple[int, int]]]]:
        """The status, reply and decoded images ((mime, (w, h)) each) of one chat request."""
        pieces = _parts(body)
        text = "".join(v for k, v in pieces if k == "text")
        urls = [v for k, v in pieces if k == "image"]
        images: list[Any] = []
        if self.text_only:
            tokens = (len(text) + sum(len(u or "") for u in urls)) // 4
        else:
            try:
                images = [_decode(u) for u in urls]
            except Exception as exc:  # what a vision server says of a part it cannot read
                return 400, {"error": {"message": f"cannot read image: {exc}"}}, []
            tokens = len(text) // 4 + self.image_tokens * len(images)
        seen = [(str(im.info.get("mime", "")), im.size) for im in images]
        if COLOUR_QUESTION in text:
            dist = self._colour(text, images)
        else:
            dist = self.grade(body, _section_images(body, images))
        return 200, self._reply(body, dist, tokens), seen

    def _colour(self, text: str, images: list[Any]) -> dict[str, float]:
        options = dict(_OPTION.findall(text.split(COLOUR_QUESTION, 1)[1]))
        if not options:
            return {"A": 0.5, "B": 0.5}
        if self.text_only or not images:
            pick = "A" if "A" in options else next(iter(options))
        else:
            rgb = mean_rgb(images[-1])
            pick = min(options, key=lambda k: sum((a - b) ** 2 for a, b in
                                                  zip(PALETTE.get(options[k], (-999, -999, -999)), rgb)))
        rest = [k for k in options if k != pick]
        return {pick: 0.9, **{k: 0.1 / len(rest) for k in rest}} if rest else {pick: 1.0}

    def _reply(self, body: dict[str, Any], dist: dict[str, float], prompt_tokens: int) -> dict[str, Any]:
        shown = sorted(((t, p) for t, p in dist.items() if p > 0), key=lambda tp: -tp[1])
        shown = shown[: int(body.get("top_logprobs") or 20)]
        first, first_p = shown[0]
        top = [{"token": t, "logprob": math.log(p), "bytes": list(t.encode())} for t, p in shown]
        return {"id": "v1", "object": "chat.completion", "model": str(body.get("model") or self.model_id),
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 1, "total_tokens": prompt_tokens + 1},
                "choices": [{"index": 0, "finish_reason": "length",
                             "message": {"role": "assistant", "content": first},
                             "logprobs": {"content": [{"token": first, "logprob": math.log(first_p),
                                                       "top_logprobs": top}]}}]}

    def __enter__(self) -> VisionRecordingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
