"""Does an endpoint see images? Asked by behaviour, never by the server's name.

A text-only server may take image parts silently: llama_cpp.server without a projector renders
the content list into the prompt as text, base64 included, and answers 200. So the probe passes
only when the reply shows the image was seen. It sends the request shape scoring sends (a
:class:`~veriscale.models.base.ScoreRequest` whose user message is text then an
:class:`~veriscale.data.images.ImagePart`, read at a score slot with labels) through the caller's
gateway, six calls:

(a) **colours**: a solid red and a solid blue 32x32 PNG, each asked "Which colour fills this
    image? A: red, B: blue" and again with the options swapped, so a letter bias cannot pass.
    Seen when each image is read as its colour with probability over :data:`SEEN_P` (averaged
    over the two orders). Only this decides ``sees_images``.
(b) **image cost**: prompt tokens with an image minus without, for two images of the same pixel
    size and very different byte size (the solid one and a noise PNG). A vision encoder's cost
    is the same for both; text-only, it grows with the bytes. ``image_tokens`` is reported only
    when the two agree within :data:`COST_AGREE`.

::

    gateway = CallExecutor(backend, store, prompt_version="models-check", refresh=True)
    report = probe_vision(gateway)        # VisionReport(sees_images=True, image_tokens=64, evidence=[...])
    cached_image_tokens(store, backend)   # 64, from the report kept in the store's meta (planning)

The embedded model reads text only: no call is made, and the report says :func:`no_vision`'s sentence.
"""

from __future__ import annotations

import io
import json
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from veriscale.errors import BudgetExceeded, UserError, setting, worded
from veriscale.models.base import Message, ModelBackend, ScoreRequest, ScoreResponse
from veriscale.models.vision import VISION_SERVERS, no_vision

if TYPE_CHECKING:
    from veriscale.data.images import ImagePart
    from veriscale.engine.store import Store
    from veriscale.engine.sync_facade import CallExecutor

#: the words every colour question starts with (a test double recognises the probe by them)
COLOUR_QUESTION = "Which colour fills this image?"
#: the pixel size of every probe image
PROBE_SIZE = (32, 32)
#: how likely the right colour must be, per image (averaged over both option orders), to count as seen
SEEN_P = 0.6
#: how far apart (relative) the two images' token costs may be and still be one per-image cost
COST_AGREE = 0.10
COLOURS = {"red": (255, 0, 0), "blue": (0, 0, 255)}
PREFILL = "Answer:"
LABELS = ("A", "B")
EMBEDDED_WHO = "the embedded model (SmolLM2-135M, text only)"


@dataclass
class VisionReport:
    """What the probe found: ``sees_images`` (None: it could not ask), ``image_tokens`` (prompt tokens
    one image costs, where the two images' costs agree), ``evidence`` (one sentence per check; a
    setting named in one reads as a Python keyword, the CLI names the flag) and ``error`` (why it
    could not ask)."""

    sees_images: bool | None
    image_tokens: int | None = None
    evidence: list[str] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"sees_images": self.sees_images, "image_tokens": self.image_tokens,
                "evidence": list(self.evidence), "error": self.error}

    def why_not(self) -> str:
        """One line on why images are not seen (the first evidence that says so, else the error)."""
        if self.error:
            return self.error
        failing = [e for e in self.evidence if "not seen" in e or "no vision" in e or "refused" in e]
        return (failing or self.evidence or ["the probe found no sign the image was seen"])[0]


def _png(pixels: bytes) -> bytes:
    from veriscale.data.images import _pillow

    Image, _ = _pillow()
    out = io.BytesIO()
    Image.frombytes("RGB", PROBE_SIZE, pixels).save(out, "PNG")
    return out.getvalue()


def probe_images() -> dict[str, ImagePart]:
    """The probe's images, read the way an input image is (as sent: no resize): "red", "blue" (solid)
    and "noise" (seeded random pixels, the same bytes every time, so its cache key is stable)."""
    from veriscale.data.images import ImageRef, ImageSettings, load_image

    n = PROBE_SIZE[0] * PROBE_SIZE[1]
    raw = {name: _png(bytes(rgb) * n) for name, rgb in COLOURS.items()}
    raw["noise"] = _png(random.Random(0).randbytes(n * 3))
    limits = ImageSettings(max_bytes=1 << 20, max_side=0)
    return {name: load_image(ImageRef(data=data, label=f"probe image ({name})"), limits) for name, data in raw.items()}


def colour_request(first: str, second: str, image: ImagePart | None) -> ScoreRequest:
    """The colour question with options ``A: first, B: second``, then the image (none: the text alone,
    the baseline of the image's cost)."""
    text = f"{COLOUR_QUESTION} A: {first}, B: {second}. Reply with the letter only."
    parts: list[Any] = [text] if image is None else [text, image]
    return ScoreRequest(messages=(Message.with_parts("user", parts),), prefill=PREFILL, labels=LABELS)


def probe_calls(images: dict[str, ImagePart]) -> list[tuple[str, ScoreRequest]]:
    """The six calls, named: the baseline, each colour in both orders, and the noise image."""
    calls = [("baseline", colour_request("red", "blue", None))]
    for colour in COLOURS:
        for first, second in (("red", "blue"), ("blue", "red")):
            calls.append((f"{colour}:{first},{second}", colour_request(first, second, images[colour])))
    calls.append(("noise", colour_request("red", "blue", images["noise"])))
    return calls


def meta_key(backend: ModelBackend) -> str:
    """Where a backend's report is kept in the store's meta."""
    return f"vision:{backend.fingerprint()}"


def _store_report(store: Store | None, backend: ModelBackend, report: VisionReport) -> None:
    if store is None or report.sees_images is None:
        return
    d = report.to_dict()
    d["evidence"] = [getattr(e, "template", e) for e in report.evidence]  # settings kept as references
    store.set_meta(meta_key(backend), json.dumps(d))


def cached_vision(store: Store | None, backend: ModelBackend) -> VisionReport | None:
    """The last probe's report for this backend's exact model, if one is kept in ``store``."""
    if store is None:
        return None
    raw = store.get_meta(meta_key(backend))
    if not raw:
        return None
    try:
        d = json.loads(raw)
        return VisionReport(sees_images=d.get("sees_images"), image_tokens=d.get("image_tokens"),
                            evidence=[worded(str(e)) for e in d.get("evidence") or []], error=d.get("error"))
    except (ValueError, TypeError, AttributeError):
        return None


def cached_image_tokens(store: Store | None, backend: ModelBackend) -> int | None:
    """Prompt tokens one image costs on this backend's model, from its last probe (None: not known,
    or it does not see images): for planning under a token budget."""
    report = cached_vision(store, backend)
    if report is None or not report.sees_images or report.image_tokens is None:
        return None
    return int(report.image_tokens)


#: prompt tokens an image is counted as for planning when no probe measured it (a 1024-pixel image
#: costs several hundred to about a thousand tokens on common vision-language models)
DEFAULT_IMAGE_TOKENS = 1024


def image_token_cost(store: Store | None, backend: ModelBackend) -> tuple[int, bool]:
    """Prompt tokens one image is counted as when planning, and whether a probe measured it (else
    :data:`DEFAULT_IMAGE_TOKENS`)."""
    measured = cached_image_tokens(store, backend)
    return (measured, True) if measured is not None else (DEFAULT_IMAGE_TOKENS, False)


def require_seen(gateway: CallExecutor) -> VisionReport:
    """The gateway's model's vision report, from the store's cache or probed now (six calls, kept for
    next time); one sentence, before any verdict is asked, when the model does not see images or could
    not be asked. Called by the commands that judge images, on their synchronous side."""
    backend: ModelBackend = gateway.model
    if backend.is_embedded:
        raise no_vision(EMBEDDED_WHO)
    report = cached_vision(gateway.store, backend) or probe_vision(gateway)
    if report.sees_images:
        return report
    if report.sees_images is None:
        raise UserError(f"{getattr(report.error, 'template', report.error) or 'the vision probe had no answer'}: "
                        "the images were not judged")
    why = report.evidence[0] if report.evidence else "the probe's colour questions were not answered from the image"
    raise UserError(
        f"{backend.display_name} does not see images ({getattr(why, 'template', why)}), so no image was judged: set "
        f"{setting('model')} to {VISION_SERVERS} (veriscale models check MODEL shows the probe)")


def _right(resp: ScoreResponse, letter: str) -> float:
    return float(resp.label_probs.get(letter, 0.0))


def _judge(answers: dict[str, ScoreResponse], images: dict[str, ImagePart]) -> VisionReport:
    evidence: list[str] = []
    seen = True
    for colour in COLOURS:
        ps = []
        for first, second in (("red", "blue"), ("blue", "red")):
            ps.append(_right(answers[f"{colour}:{first},{second}"], "A" if first == colour else "B"))
        mean = sum(ps) / len(ps)
        ok = mean > SEEN_P
        seen = seen and ok
        evidence.append(f"colour probe: the solid {colour} image was read as {colour} with p={ps[0]:.2f} "
                        f"and p={ps[1]:.2f} (options swapped); mean {mean:.2f} "
                        + (f"> {SEEN_P}: seen" if ok else f"<= {SEEN_P}: not seen"))
    base = answers["baseline"].prompt_tokens_total
    solid = answers["red:red,blue"].prompt_tokens_total - base
    noise = answers["noise"].prompt_tokens_total - base
    solid_img, noise_img = images["red"], images["noise"]
    size = f"{solid_img.width}x{solid_img.height}"
    costs = (f"{solid} prompt tokens for a solid {size} PNG ({len(solid_img.data)} bytes) and {noise} for a "
             f"noise {size} PNG ({len(noise_img.data)} bytes)")
    tokens: int | None = None
    if base <= 0 or answers["noise"].prompt_tokens_total <= 0:
        evidence.append("image cost: the server reports no prompt tokens, so the cost of an image is not known")
    elif solid <= 0 and noise <= 0:
        evidence.append(f"image cost: {costs}: a request with an image counts no more than the text alone, "
                        "so the image was dropped")
    elif solid > 0 and noise > 0 and abs(solid - noise) <= COST_AGREE * max(solid, noise):
        tokens = max(solid, noise)
        evidence.append(f"image cost: {costs}: the same whatever the bytes, as a vision encoder's")
    elif noise > solid:
        evidence.append(f"image cost: {costs}: it grows with the bytes, as an image sent in as text does")
    else:
        evidence.append(f"image cost: {costs}: they differ by more than {COST_AGREE:.0%}, so no per-image cost")
    return VisionReport(sees_images=seen, image_tokens=tokens if seen else None, evidence=evidence)


def probe_vision(gateway: CallExecutor) -> VisionReport:
    """Ask the gateway's model whether it sees images (six calls through ``gateway``, none for the
    embedded model), and keep the report in the gateway's store (``vision:<fingerprint>`` in its
    meta). Never raises for a model that does not see images or cannot be asked: that is the report."""
    from veriscale.engine.planned import PlannedCall

    backend: ModelBackend = gateway.model
    if backend.is_embedded:
        report = VisionReport(sees_images=False, evidence=[worded(no_vision(EMBEDDED_WHO).template)])
        _store_report(gateway.store, backend, report)
        return report
    images = probe_images()
    calls = [PlannedCall(req, tag=name) for name, req in probe_calls(images)]
    outcomes: list[Any] = []
    try:  # the baseline alone first: a model that cannot be asked at all is no answer about images
        outcomes += gateway.run(calls[:1])
    except UserError as exc:
        return VisionReport(sees_images=None, error=worded(f"the vision probe could not ask the model: {exc.template}"))
    if outcomes[0].error or outcomes[0].response is None:
        why = outcomes[0].error or "no answer"
        return VisionReport(sees_images=None, error=worded(
            f"the vision probe could not ask the model: {getattr(why, 'template', why)}"))
    try:
        outcomes += gateway.run(calls[1:])
    except BudgetExceeded as exc:
        return VisionReport(sees_images=None, error=worded(f"the vision probe was not asked: {exc.template}"))
    except UserError as exc:  # refused before it was sent (an images-free route, a model without vision)
        report = VisionReport(sees_images=False, evidence=[worded(f"images not seen: {exc.template}")])
        _store_report(gateway.store, backend, report)
        return report
    answers = {o.call.tag: o.response for o in outcomes if o.response is not None and not o.error}
    errors = {o.call.tag: o.error or "no answer" for o in outcomes if o.call.tag not in answers}
    if errors:
        name, why = next(iter(errors.items()))
        report = VisionReport(sees_images=False, evidence=[worded(
            f"images not seen: the server refused a request with an image ({name}): "
            f"{getattr(why, 'template', why)}")])
    else:
        report = _judge(answers, images)
    _store_report(gateway.store, backend, report)
    return report


__all__ = ["COLOUR_QUESTION", "COST_AGREE", "SEEN_P", "VisionReport", "cached_image_tokens", "cached_vision",
           "colour_request", "meta_key", "probe_calls", "probe_images", "probe_vision"]
