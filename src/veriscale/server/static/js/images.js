// images.js — the images a judgement saw, as thumbnails: a call's request names each image only by
// the sha256 of its bytes, and GET /api/images/<sha256> serves the bytes the store kept. A progress
// curve's filmstrip shows the frames of each checkpoint, the one of the hovered or picked point marked.
// Nothing is drawn for a run without images.

import { fill, h } from "./dom.js";

const DIGEST = /^[0-9a-f]{64}$/;

/** Where the server serves the image with this digest. */
export function imageUrl(sha256) {
  return `/api/images/${sha256}`;
}

/** One thumbnail with its label (null for a record without a valid digest); `kept: false`: a placeholder. */
export function thumb(image, { testid = "thumb" } = {}) {
  const sha = String(image?.sha256 ?? "").toLowerCase();
  if (!DIGEST.test(sha)) return null;
  const label = String(image.label || image.source || `${sha.slice(0, 12)}…`);
  const size = image.width && image.height ? ` · ${image.width}×${image.height}` : "";
  const at = typeof image.at_s === "number" ? ` · ${image.at_s.toFixed(2)} s` : "";
  const fig = h("figure", { class: "thumb", "data-testid": testid, "data-sha256": sha, title: `${label}${size}${at}\nsha256 ${sha}` });
  if (image.kept === false) {
    fill(fig, h("div", { class: "thumb-missing" }, "not kept"), h("figcaption", {}, label));
    return fig;
  }
  const img = h("img", { src: imageUrl(sha), alt: label, decoding: "async", "data-testid": "thumb-img" });
  img.addEventListener("error", () => fig.classList.add("missing"));
  fill(fig, img, h("figcaption", {}, label));
  return fig;
}

/** The thumbnails of a call's images (its `images`), or null when it sent none. */
export function thumbnails(images, testid = "call-images") {
  const list = (Array.isArray(images) ? images : []).map((i) => thumb(i)).filter(Boolean);
  return list.length ? h("div", { class: "thumbs", "data-testid": testid }, list) : null;
}

/** A verdict's images by section ({candidate: [...], a: [...], ...}), or null when it has none. */
export function sectionThumbnails(bySection) {
  if (!bySection || typeof bySection !== "object") return null;
  const rows = Object.entries(bySection).filter(([, list]) => Array.isArray(list) && list.length)
    .map(([section, list]) => h("div", { class: "thumb-section" }, h("div", { class: "muted small" }, section),
      thumbnails(list, "verdict-images")));
  return rows.length ? h("div", { class: "thumb-sections" }, rows) : null;
}

/**
 * A progress curve's filmstrip: `update(points)` draws each point's `frames` (records with a
 * sha256 and a label) in step order; `mark(step)` outlines that checkpoint's frames. Empty (and
 * hidden) while no point has frames.
 */
export function filmstrip(trajectory) {
  const el = h("div", { class: "filmstrip", "data-testid": "filmstrip", "data-trajectory": trajectory, hidden: true });
  let marked = null;
  const mark = (step) => {
    marked = step === null || step === undefined ? null : String(step);
    let current = null;
    for (const g of el.querySelectorAll(".frame-group")) {
      const on = g.dataset.step === marked;
      g.classList.toggle("current", on);
      if (on) current = g;
    }
    if (current) current.scrollIntoView({ block: "nearest", inline: "nearest" });
  };
  const update = (points) => {
    const withFrames = [...(points || [])].filter((p) => Array.isArray(p?.frames) && p.frames.length)
      .sort((a, b) => a.step - b.step);
    el.hidden = !withFrames.length;
    fill(el, withFrames.map((p) => {
      const thumbs = p.frames.map((f) => thumb(f, { testid: "frame" })).filter(Boolean);
      const group = h("div", { class: "frame-group", "data-testid": "frame-group", "data-step": p.step },
        h("div", { class: "frame-step muted small" }, `step ${p.step}`), h("div", { class: "thumbs" }, thumbs));
      group.addEventListener("mouseenter", () => el.dispatchEvent(new CustomEvent("frame-hover", { detail: p.step })));
      return group;
    }));
    if (withFrames.length) mark(marked ?? withFrames[withFrames.length - 1].step);
  };
  return { el, update, mark };
}
