// charts.js — the dashboard's SVG pictures: horizontal bars, a preference heatmap with its
// legend, a label-distribution bar chart and a live progress line chart. All built with
// createElementNS (dom.s); every label from the data is a text node.

import { fmtPct, s } from "./dom.js";

const FONT = 12;

function svgRoot(width, height, attrs = {}) {
  return s("svg", { viewBox: `0 0 ${width} ${height}`, width, height, class: "chart", role: "img", ...attrs });
}

function titled(el, text) {
  el.appendChild(s("title", {}, text));
  return el;
}

// -- horizontal bars -------------------------------------------------------------------------

/**
 * items: [{label, title, value, highlight}] drawn top to bottom; opts: {width, max, format,
 * reference: {value, label}, caption, attrs}.
 */
export function barChart(items, opts = {}) {
  const width = opts.width ?? 520;
  const format = opts.format ?? ((v) => v.toFixed(3));
  const rowH = 24;
  const top = opts.caption ? 40 : 16;
  const labelW = Math.min(190, Math.max(60, 7 * Math.max(...items.map((i) => String(i.label).length), 4) + 12));
  const valueW = 56;
  const plotW = width - labelW - valueW - 8;
  const height = top + rowH * items.length + 22;
  const max = opts.max ?? niceCeil(Math.max(1e-9, ...items.map((i) => i.value ?? 0), opts.reference?.value ?? 0) * 1.08);
  const x = (v) => labelW + (Math.max(0, v) / max) * plotW;
  const svg = svgRoot(width, height, opts.attrs);
  if (opts.caption) svg.appendChild(s("text", { x: 0, y: 16, class: "caption" }, opts.caption));
  items.forEach((item, k) => {
    const y = top + k * rowH;
    const g = s("g", { class: item.highlight ? "bar best" : "bar" });
    g.appendChild(titled(s("text", { x: labelW - 8, y: y + rowH / 2 + 4, "text-anchor": "end", class: "axis-label" },
      fitLabel(item.label, labelW - 10)), item.title ?? item.label));
    const w = Math.max(1, x(item.value ?? 0) - labelW);
    g.appendChild(titled(s("rect", { x: labelW, y: y + 4, width: w, height: rowH - 8, rx: 2 }),
      `${item.title ?? item.label}: ${item.value === null || item.value === undefined ? "—" : format(item.value)}`));
    g.appendChild(s("text", { x: labelW + w + 6, y: y + rowH / 2 + 4, class: "value-label" },
      item.value === null || item.value === undefined ? "—" : format(item.value)));
    svg.appendChild(g);
  });
  const axisY = top + rowH * items.length;
  svg.appendChild(s("line", { x1: labelW, x2: labelW + plotW, y1: axisY, y2: axisY, class: "axis" }));
  svg.appendChild(s("text", { x: labelW, y: axisY + 15, class: "tick" }, "0"));
  svg.appendChild(s("text", { x: labelW + plotW, y: axisY + 15, "text-anchor": "end", class: "tick" }, format(max)));
  if (opts.reference && opts.reference.value <= max) {
    const rx = x(opts.reference.value);
    svg.appendChild(s("line", { x1: rx, x2: rx, y1: top, y2: axisY, class: "reference" }));
    svg.appendChild(s("text", { x: rx, y: top - 4, "text-anchor": "middle", class: "tick" }, opts.reference.label));
  }
  return svg;
}

/** The smallest of 1, 2, 2.5, 5 × 10^k at or above v. */
function niceCeil(v) {
  const mag = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 2.5, 5, 10].map((f) => f * mag).find((c) => c >= v - 1e-12) ?? v;
}

// -- preference heatmap ----------------------------------------------------------------------

const LOW = [196, 69, 54];    // row candidate loses
const MID = [246, 246, 246];
const HIGH = [37, 99, 235];   // row candidate wins

/** The colour of P(row beats column) = p: red below 0.5, blue above. */
export function preferenceColour(p) {
  const t = Math.max(0, Math.min(1, p));
  const [a, b, f] = t < 0.5 ? [LOW, MID, t / 0.5] : [MID, HIGH, (t - 0.5) / 0.5];
  const mix = a.map((c, k) => Math.round(c + (b[k] - c) * f));
  return `rgb(${mix[0]}, ${mix[1]}, ${mix[2]})`;
}

/**
 * matrix: N×N of P(row beats column) or null; rowLabels/titles per candidate; counts: N×N
 * judgements; orders: N×N of {first, second, position_bias} (P(row beats column) with the row
 * shown first / second; a biased cell gets a ⇄ mark); onCell(i, j) on click of a cell with a
 * value. Returns the svg.
 */
export function heatmap({ matrix, rowLabels, colLabels, titles, counts, orders, onCell }) {
  const n = matrix.length;
  const cell = Math.max(22, Math.min(52, Math.floor(380 / Math.max(n, 1))));
  const labelW = Math.min(170, Math.max(40, 7 * Math.max(...rowLabels.map((l) => String(l).length), 2) + 14));
  const top = 26;
  const legendH = 54;
  const width = Math.max(labelW + cell * n + 10, 390);
  const height = top + cell * n + legendH;
  const svg = svgRoot(width, height, { "data-testid": "heatmap", class: "chart heatmap" });
  const showValues = cell >= 30;
  for (let j = 0; j < n; j += 1) {
    svg.appendChild(titled(s("text", { x: labelW + j * cell + cell / 2, y: top - 8, "text-anchor": "middle", class: "axis-label" },
      colLabels[j]), titles[j]));
  }
  for (let i = 0; i < n; i += 1) {
    svg.appendChild(titled(s("text", { x: labelW - 8, y: top + i * cell + cell / 2 + 4, "text-anchor": "end", class: "axis-label" },
      fitLabel(rowLabels[i], labelW - 10)), titles[i]));
    for (let j = 0; j < n; j += 1) {
      const p = matrix[i][j];
      const x = labelW + j * cell;
      const y = top + i * cell;
      if (p === null || p === undefined) {
        svg.appendChild(titled(s("rect", { x, y, width: cell - 2, height: cell - 2, class: i === j ? "cell diagonal" : "cell empty" }),
          i === j ? titles[i] : `${titles[i]} vs ${titles[j]}: never compared`));
        continue;
      }
      const order = orders?.[i]?.[j] ?? null;
      const biased = Boolean(order && order.position_bias);
      const g = s("g", { class: biased ? "cell-group position-bias" : "cell-group", "data-testid": "heatmap-cell", "data-i": i,
        "data-j": j, "data-position-bias": biased ? "1" : "0", tabindex: 0, role: "button" });
      const rect = s("rect", { x, y, width: cell - 2, height: cell - 2, class: "cell", fill: preferenceColour(p) });
      const n_ = counts ? counts[i][j] : null;
      titled(rect, `P(${titles[i]} beats ${titles[j]}) = ${p.toFixed(3)}${n_ ? ` over ${n_} judgement(s)` : ""}${orderText(order)}`);
      g.appendChild(rect);
      if (biased) {
        g.appendChild(s("text", { x: x + cell - 4, y: y + 10, "text-anchor": "end", class: "bias-mark",
          "data-testid": "position-bias-mark" }, "⇄"));
      }
      if (showValues) {
        g.appendChild(s("text", { x: x + (cell - 2) / 2, y: y + (cell - 2) / 2 + 4, "text-anchor": "middle",
          class: Math.abs(p - 0.5) > 0.3 ? "cell-value light" : "cell-value" }, p.toFixed(2)));
      }
      if (onCell) {
        g.addEventListener("click", () => onCell(i, j, g));
        g.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); onCell(i, j, g); } });
      }
      svg.appendChild(g);
    }
  }
  // legend: discrete steps from 0 to 1, and the grey of a pair never compared
  const ly = top + cell * n + 16;
  const steps = 11;
  const sw = 16;
  svg.appendChild(s("text", { x: 0, y: ly + 11, class: "tick" }, "P(row ≻ col)"));
  const lx = 84;
  for (let k = 0; k < steps; k += 1) {
    svg.appendChild(s("rect", { x: lx + k * sw, y: ly, width: sw, height: 12, fill: preferenceColour(k / (steps - 1)) }));
  }
  for (const [v, anchor] of [[0, "start"], [0.5, "middle"], [1, "end"]]) {
    svg.appendChild(s("text", { x: lx + v * steps * sw, y: ly + 26, "text-anchor": anchor, class: "tick" }, String(v)));
  }
  const gx = lx + steps * sw + 16;
  svg.appendChild(s("rect", { x: gx, y: ly, width: 12, height: 12, class: "cell empty" }));
  svg.appendChild(s("text", { x: gx + 16, y: ly + 11, class: "tick" }, "not compared"));
  if (orders && orders.some((row) => row.some((o) => o && o.position_bias))) {
    svg.appendChild(s("text", { x: gx + 104, y: ly + 11, class: "tick bias-legend" }, "⇄ position bias"));
  }
  return svg;
}

/** The per-order values of a cell, for its hover title. */
function orderText(order) {
  if (!order) return "";
  const v = (p, n) => (typeof p === "number" ? `${p.toFixed(4)}${n > 1 ? ` (mean of ${n})` : ""}` : "not judged");
  return ` · row shown first: ${v(order.first, order.n_first)} · row shown second: ${v(order.second, order.n_second)}` +
    (order.position_bias ? " · position bias: the verdict flips with the slot order" : "");
}

/**
 * A label cut to about `width` px (7 px a character): a leading "#<index> " is kept, the rest keeps
 * its end ("#1 …tail-ZQ9"), where ids differ. The full text goes in the element's title.
 */
export function fitLabel(label, width) {
  const t = String(label);
  const max = Math.max(6, Math.floor(width / 7));
  if (t.length <= max) return t;
  const number = (t.match(/^#\d+ /) || [""])[0];
  const room = Math.max(3, max - number.length - 1);
  return `${number}…${t.slice(t.length - room)}`;
}

// -- label distribution ------------------------------------------------------------------------

/** Vertical bars, one per label in order, height = its probability (scaled to the largest). */
export function labelDistribution(labels, probs) {
  const list = Array.isArray(labels) && labels.length ? labels : Object.keys(probs || {});
  const values = list.map((l) => (probs && typeof probs[l] === "number" ? probs[l] : 0));
  const barW = list.length > 12 ? 16 : 26;
  const left = 34;
  const plotH = 70;
  const width = Math.max(200, left + list.length * barW + 8);
  const height = plotH + 34;
  const max = Math.max(0.05, ...values);
  const top = Math.max(...values);
  const svg = svgRoot(width, height, { "data-testid": "label-dist", class: "chart label-dist" });
  svg.appendChild(s("line", { x1: left, x2: width - 4, y1: 8 + plotH, y2: 8 + plotH, class: "axis" }));
  svg.appendChild(s("text", { x: left - 4, y: 12, "text-anchor": "end", class: "tick" }, fmtPct(max)));
  svg.appendChild(s("text", { x: left - 4, y: 8 + plotH, "text-anchor": "end", class: "tick" }, "0"));
  list.forEach((label, k) => {
    const v = values[k];
    const bh = (v / max) * plotH;
    const x = left + k * barW;
    const rect = s("rect", { x: x + 2, y: 8 + plotH - bh, width: barW - 4, height: Math.max(bh, 0.5),
      class: v === top && v > 0 ? "dist-bar top" : "dist-bar" });
    svg.appendChild(titled(rect, `${label}: ${fmtPct(v, 1)}`));
    svg.appendChild(s("text", { x: x + barW / 2, y: 8 + plotH + 14, "text-anchor": "middle", class: "tick" }, clipLabel(label)));
  });
  return svg;
}

function clipLabel(label) {
  const t = String(label);
  return t.length > 3 ? t.slice(0, 3) : t;
}

// -- progress line chart -----------------------------------------------------------------------

const EVENT_CLASSES = new Set(["stall", "regression", "likely_done"]);

/**
 * A progress curve that can grow: chart.update({points, events, nSteps}) redraws the same svg.
 * points: [{step, value (0-1 or null), label_mass}], events: [{kind, step, message}].
 */
export function progressChart(trajectory, { width = 1180, height = 210 } = {}) {
  const svg = svgRoot(width, height, { "data-testid": "curve", "data-trajectory": trajectory, class: "chart curve" });
  const m = { left: 44, right: 14, top: 24, bottom: 30 };
  const plotW = width - m.left - m.right;
  const plotH = height - m.top - m.bottom;

  function update({ points, events, nSteps }) {
    svg.replaceChildren();
    const lastStep = points.reduce((a, p) => Math.max(a, p.step || 0), 0);
    const xmax = Math.max(nSteps || 0, lastStep, ...events.map((e) => e.step || 0), 1);
    const x = (step) => m.left + (step / xmax) * plotW;
    const y = (v) => m.top + (1 - v) * plotH;
    for (const v of [0, 0.25, 0.5, 0.75, 1]) {
      svg.appendChild(s("line", { x1: m.left, x2: m.left + plotW, y1: y(v), y2: y(v), class: v === 0 ? "axis" : "grid" }));
      svg.appendChild(s("text", { x: m.left - 6, y: y(v) + 4, "text-anchor": "end", class: "tick" }, `${v * 100}%`));
    }
    for (const t of ticks(xmax)) {
      svg.appendChild(s("line", { x1: x(t), x2: x(t), y1: m.top + plotH, y2: m.top + plotH + 4, class: "axis" }));
      svg.appendChild(s("text", { x: x(t), y: m.top + plotH + 16, "text-anchor": "middle", class: "tick" }, String(t)));
    }
    svg.appendChild(s("text", { x: m.left + plotW, y: height - 2, "text-anchor": "end", class: "tick" }, "step"));
    // events: a marked vertical line per event, labelled with its kind
    const seen = new Map();
    for (const event of events) {
      const k = seen.get(event.step) || 0;
      seen.set(event.step, k + 1);
      const cls = EVENT_CLASSES.has(event.kind) ? `ev-${event.kind}` : "ev-other";
      const g = s("g", { class: `event ${cls}`, "data-testid": "curve-event", "data-kind": event.kind ?? "" });
      const ex = x(event.step || 0);
      g.appendChild(s("line", { x1: ex, x2: ex, y1: m.top, y2: m.top + plotH, class: "event-line" }));
      g.appendChild(s("text", { x: ex + 3, y: m.top - 6 + k * 12, class: "event-label" }, String(event.kind ?? "event").replace("_", " ")));
      titled(g, event.message || `${event.kind} at step ${event.step}`);
      svg.appendChild(g);
    }
    // the line, broken where a checkpoint has no value
    const sorted = [...points].sort((a, b) => a.step - b.step);
    let run = [];
    const flush = () => {
      if (run.length > 1) svg.appendChild(s("polyline", { points: run.join(" "), class: "line" }));
      run = [];
    };
    for (const p of sorted) {
      if (typeof p.value === "number") run.push(`${x(p.step).toFixed(1)},${y(p.value).toFixed(1)}`);
      else flush();
    }
    flush();
    for (const p of sorted) {
      const valued = typeof p.value === "number";
      const low = typeof p.label_mass === "number" && p.label_mass < 0.5;
      const c = s("circle", { cx: x(p.step), cy: valued ? y(p.value) : y(0), r: valued ? 3.5 : 3,
        class: ["point", valued ? null : "missing", low ? "low-mass" : null].filter(Boolean).join(" "),
        "data-testid": "curve-point", "data-step": p.step });
      titled(c, valued
        ? `step ${p.step}: ${fmtPct(p.value, 1)}${typeof p.label_mass === "number" ? ` · label mass ${p.label_mass.toFixed(2)}` : ""}${low ? " (low)" : ""}`
        : `step ${p.step}: no value${p.error ? ` (${p.error})` : ""}`);
      svg.appendChild(c);
    }
  }

  return { svg, update };
}

function ticks(max) {
  const raw = max / 6;
  const mag = 10 ** Math.floor(Math.log10(Math.max(raw, 1)));
  const step = [1, 2, 5, 10].map((f) => f * mag).find((v) => v >= raw) || mag;
  const out = [];
  for (let t = 0; t <= max + 1e-9; t += step) out.push(Math.round(t));
  return out;
}
