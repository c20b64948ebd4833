// dom.js — small DOM builders. Data is only ever put in the page as text nodes or attribute
// values (never parsed as HTML): h("td", {class: "id"}, run.id), s("rect", {x: 0, ...}).

const SVG_NS = "http://www.w3.org/2000/svg";

/** An HTML element with attributes (strings, event handlers "onclick", ...) and children. */
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/** An SVG element (built with createElementNS, so no markup is ever parsed). */
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

/** Only the dashboard's own routes may be links: anything else becomes "#/runs". */
export function safeHref(value) {
  const text = String(value);
  return text.startsWith("#/") ? text : "#/runs";
}

function build(el, attrs, children) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) {
      if (typeof value !== "function") throw new Error(`${name} must be a function`);
      el.addEventListener(name.slice(2), value);
    } else if (name === "style") {
      throw new Error("inline style attributes are refused by the CSP: use a class or el.style");
    } else if (name === "href") {
      el.setAttribute("href", safeHref(value));
    } else if (name === "class") {
      el.setAttribute("class", Array.isArray(value) ? value.filter(Boolean).join(" ") : String(value));
    } else if (name === "value" && "value" in el && !(el instanceof SVGElement)) {
      el.value = String(value);
    } else if (name === "checked" || name === "selected" || name === "disabled") {
      el[name] = Boolean(value);
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

/** Append children: nodes as they are, anything else as text; arrays flattened, null skipped. */
export function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
  return el;
}

/** Replace everything in el with the given children. */
export function fill(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

export function setReady(ready) {
  document.body.dataset.ready = ready ? "1" : "0";
}

// -- formatting ----------------------------------------------------------------------------

export function fmtNum(value, digits = 3) {
  if (value === null || value === undefined || Number.isNaN(value)) return "—";
  if (typeof value !== "number") return String(value);
  return Number.isInteger(value) ? value.toLocaleString("en-US") : value.toFixed(digits);
}

export function fmtPct(value, digits = 0) {
  if (value === null || value === undefined || typeof value !== "number") return "—";
  return `${(value * 100).toFixed(digits)}%`;
}

export function fmtTime(seconds) {
  if (!seconds) return "—";
  const d = new Date(seconds * 1000);
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

export function fmtDuration(start, end) {
  if (!start || !end) return "—";
  const s = Math.max(0, end - start);
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
}

export function pretty(value) {
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

/** Names that fit a chart label whole (a proxy's "candidate-1"); longer ones may lose their shared prefix. */
export const SHORT_NAME = 16;

/** The ids without the prefix they all share ("task__abc", "task__xyz" → "…abc", "…xyz"); a name of
 *  at most SHORT_NAME characters stays whole ("candidate-1", never "…1"). */
export function shortNames(ids) {
  const names = ids.map((id) => String(id ?? ""));
  if (names.length < 2) return names;
  let prefix = names[0];
  for (const name of names) {
    while (prefix && !name.startsWith(prefix)) prefix = prefix.slice(0, -1);
  }
  if (prefix.length < 6) return names;
  return names.map((name) => (name.length > SHORT_NAME && name.length > prefix.length ? "…" + name.slice(prefix.length) : name));
}

export function clip(text, max = 80) {
  const t = String(text ?? "");
  return t.length > max ? t.slice(0, max - 1) + "…" : t;
}

/** A coloured status chip: ok, running, failed, ... (the class comes from a fixed list). */
const STATUS_CLASSES = new Set(["ok", "done", "running", "queued", "failed", "interrupted", "cancelled",
  "delivered", "error", "completed", "modified", "added", "removed", "unchanged", "binary", "skipped"]);
export function statusChip(status, attrs = {}) {
  const known = STATUS_CLASSES.has(status) ? `st-${status}` : "st-other";
  return h("span", { ...attrs, class: ["chip", known, attrs.class] }, status ?? "unknown");
}

/** A message box for an error sentence from the server (or the network). */
export function errorBox(message) {
  return h("div", { class: "error-box", role: "alert" }, String(message));
}

/** A horizontal bar 0..1 as a div whose width is set through the CSSOM (allowed by the CSP). */
export function miniBar(value, { max = 1, title } = {}) {
  const inner = h("span", { class: "minibar-fill" });
  const frac = typeof value === "number" && max > 0 ? Math.max(0, Math.min(1, value / max)) : 0;
  inner.style.width = `${(frac * 100).toFixed(1)}%`;
  return h("span", { class: "minibar", title: title ?? null }, inner);
}

/** fn, called once calls have paused for ms; .cancel() drops a pending call. */
export function debounce(fn, ms) {
  let timer = null;
  const debounced = (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
  debounced.cancel = () => clearTimeout(timer);
  return debounced;
}
