// pages/trajectory.js — #/runs/<id>/trajectory/<name>: a virtualised list of a trajectory's
// steps. Rows have a fixed height; a spacer of total × ROW_H gives the scroll range and only
// the rows in view (± OVERSCAN) are in the DOM. Steps are fetched PAGE at a time and cached.
// A side panel shows a step's full text; search and jump-to-error use /steps/find.
// One numbering: a step is shown as its 1-based number, as the progress curve's x axis, its
// points' ?step=N links and `veriscale track` count it (checkpoint 3 is the third step). The
// 0-based place (`index`, what /steps' offset counts) stays internal: data-index and paging.

import { api } from "../api.js";
import { errorBox, fill, fmtNum, h } from "../dom.js";
import { toolCallBlock } from "../tool_blocks.js";

const ROW_H = 28;
const OVERSCAN = 8;
const PAGE = 200;
const stepNumber = (index) => index + 1; // the number users see for the step at 0-based place `index`

export async function trajectoryPage(ctx, runId, name, step) {
  const first = await api.steps(runId, name, 0, PAGE);
  if (!ctx.alive) return;
  const total = first.total;
  const pages = new Map([[0, first.steps]]); // page number -> steps (or a pending promise)
  const pending = new Map();

  let selected = null;
  let matches = [];
  let matchPos = -1;
  let errors = null;

  const spacer = h("div", { class: "spacer" });
  spacer.style.height = `${total * ROW_H}px`;
  const rows = h("div", { class: "rows" });
  spacer.appendChild(rows);
  const viewport = h("div", { class: "viewport", "data-testid": "trajectory-viewport", tabindex: 0 }, spacer);
  const detail = h("div", { class: "card step-detail", "data-testid": "step-detail" },
    h("p", { class: "muted" }, "Click a step to read it in full."));
  const search = h("input", { type: "search", placeholder: "Search the steps…", "data-testid": "step-search", "aria-label": "search steps" });
  const count = h("span", { class: "muted match-count", "data-testid": "match-count" }, "");
  const status = h("span", { class: "muted small" });
  const prevBtn = h("button", { "data-testid": "search-prev", disabled: true, onclick: () => stepMatch(-1), title: "previous match" }, "‹ Prev");
  const nextBtn = h("button", { "data-testid": "search-next", disabled: true, onclick: () => stepMatch(1), title: "next match" }, "Next ›");
  const errorBtn = h("button", { "data-testid": "jump-error", onclick: () => jumpError() }, "Next error ↓");
  const message = h("div", {});

  search.addEventListener("keydown", (e) => {
    if (e.key === "Enter") {
      e.preventDefault();
      if (e.shiftKey) stepMatch(-1);
      else if (matches.length && search.value.trim() === lastQuery) stepMatch(1);
      else runSearch();
    }
  });

  fill(ctx.root, h("section", { class: "page trajectory", "data-testid": "trajectory-page" },
    h("div", { class: "crumbs" }, h("a", { href: "#/runs" }, "Runs"), " / ", h("a", { href: `#/runs/${runId}` }, `#${runId}`), " / trajectory"),
    h("div", { class: "page-head" }, h("h1", {}, name), h("span", { class: "muted", "data-testid": "steps-total" }, `${total.toLocaleString("en-US")} steps`)),
    h("div", { class: "toolbar" }, search, h("button", { onclick: () => runSearch() }, "Find"), count, prevBtn, nextBtn,
      h("span", { class: "sep" }), errorBtn, status),
    message,
    h("div", { class: "viewer" }, viewport, detail)));

  // -- data ----------------------------------------------------------------------------------
  const stepAt = (index) => pages.get(Math.floor(index / PAGE))?.[index % PAGE] ?? null;

  function loadPage(page) {
    if (pages.has(page)) return Promise.resolve(pages.get(page));
    if (pending.has(page)) return pending.get(page);
    const promise = api.steps(runId, name, page * PAGE, PAGE).then((res) => {
      pages.set(page, res.steps);
      pending.delete(page);
      if (ctx.alive) render();
      return res.steps;
    }, (err) => {
      pending.delete(page);
      if (ctx.alive) fill(message, errorBox(err.message));
      throw err;
    });
    pending.set(page, promise);
    return promise;
  }

  async function loadStep(index) {
    await loadPage(Math.floor(index / PAGE));
    return stepAt(index);
  }

  // -- rendering -----------------------------------------------------------------------------
  let frame = 0;
  function schedule() {
    if (!frame) frame = requestAnimationFrame(() => { frame = 0; render(); });
  }

  function render() {
    const top = viewport.scrollTop;
    const height = viewport.clientHeight || 600;
    const start = Math.max(0, Math.floor(top / ROW_H) - OVERSCAN);
    const end = Math.min(total, Math.ceil((top + height) / ROW_H) + OVERSCAN);
    const matchSet = new Set(matches);
    const out = [];
    for (let i = start; i < end; i += 1) {
      const step = stepAt(i);
      if (!step) loadPage(Math.floor(i / PAGE)).catch(() => {});
      out.push(row(i, step, matchSet.has(i)));
    }
    rows.replaceChildren(...out);
  }

  function row(index, step, isMatch) {
    const el = h("div", {
      class: ["step-row", step?.error ? "error" : null, isMatch ? "match" : null, index === selected ? "selected" : null,
        isMatch && matches[matchPos] === index ? "current" : null, step ? null : "loading"],
      "data-testid": "step-row", "data-index": index, "data-step": stepNumber(index), role: "button",
      onclick: () => select(index),
    },
    h("span", { class: "idx", "data-testid": "row-step" }, String(stepNumber(index))),
    h("span", { class: "role" }, step ? step.role ?? "" : ""),
    h("span", { class: "first-line" }, step ? firstLine(step.detail ? step.detail.text || step.text : step.text) : "…"),
    step?.detail?.tool_calls?.length ? h("span", { class: "chip tool", "data-testid": "row-tool" },
      step.detail.tool_calls.map((c) => String((c.function || c).name ?? "tool")).join(", ")) : null,
    step?.error ? h("span", { class: "chip st-failed" }, "error") : null);
    el.style.transform = `translateY(${index * ROW_H}px)`;
    return el;
  }

  async function select(index) {
    selected = index;
    render();
    const step = await loadStep(index).catch(() => null);
    if (!ctx.alive || selected !== index) return;
    if (!step) {
      fill(detail, errorBox(`step ${stepNumber(index)} could not be loaded`));
      return;
    }
    fill(detail,
      h("div", { class: "detail-head" },
        h("strong", { "data-testid": "detail-step" }, `step ${step.step ?? stepNumber(index)}`), h("span", { class: "muted small" }, `of ${total}`),
        h("span", { class: "chip" }, step.role ?? "—"),
        step.error ? h("span", { class: "chip st-failed" }, "failed (non-zero exit)") : null,
        h("span", { class: "grow" }),
        h("button", { class: "small", disabled: index <= 0, onclick: () => goTo(index - 1) }, "↑"),
        h("button", { class: "small", disabled: index >= total - 1, onclick: () => goTo(index + 1) }, "↓")),
      step.detail ? stepMeta(step.detail.metrics, previousTime(index)) : null,
      step.detail ? stepBlocks(step.detail) : h("pre", { class: "step-text", "data-testid": "step-text" }, step.text ?? ""));
  }

  /** The timestamp of the step before `index`, when it is loaded and has one (for the step's time). */
  function previousTime(index) {
    const before = index > 0 ? stepAt(index - 1) : null;
    return before?.detail?.metrics?.timestamp ?? null;
  }

  /** Scroll so that step `index` is in the middle of the viewport, and select it. */
  async function goTo(index) {
    const height = viewport.clientHeight || 600;
    const rowTop = index * ROW_H;
    if (rowTop < viewport.scrollTop || rowTop + ROW_H > viewport.scrollTop + height) {
      viewport.scrollTop = Math.max(0, rowTop - height / 2 + ROW_H / 2);
    }
    await loadPage(Math.floor(index / PAGE)).catch(() => {});
    await select(index);
  }

  // -- search and errors ---------------------------------------------------------------------
  let lastQuery = "";
  async function runSearch() {
    const q = search.value.trim();
    lastQuery = q;
    if (!q) {
      matches = [];
      matchPos = -1;
      fill(count, "");
      prevBtn.disabled = nextBtn.disabled = true;
      render();
      return;
    }
    ctx.ready(false);
    try {
      const res = await api.findSteps(runId, name, { q });
      if (!ctx.alive || lastQuery !== q) return;
      matches = res.matches || [];
      prevBtn.disabled = nextBtn.disabled = matches.length === 0;
      if (!matches.length) {
        matchPos = -1;
        fill(count, "no match");
        render();
        return;
      }
      const after = selected ?? -1;
      matchPos = Math.max(0, matches.findIndex((m) => m >= after));
      await showMatch();
    } catch (err) {
      fill(message, errorBox(err.message));
    } finally {
      ctx.ready(true);
    }
  }

  async function showMatch() {
    fill(count, `${matchPos + 1} of ${matches.length}${matches.length >= 10000 ? "+" : ""}`);
    await goTo(matches[matchPos]);
  }

  async function stepMatch(delta) {
    if (!matches.length) return;
    ctx.ready(false);
    matchPos = (matchPos + delta + matches.length) % matches.length;
    await showMatch();
    ctx.ready(true);
  }

  async function jumpError() {
    ctx.ready(false);
    try {
      if (errors === null) errors = (await api.findSteps(runId, name, { errors: "true" })).matches || [];
      if (!ctx.alive) return;
      if (!errors.length) {
        fill(status, "no failed step in this trajectory");
        return;
      }
      const after = selected ?? -1;
      const next = errors.find((e) => e > after) ?? errors[0];
      fill(status, `error ${errors.indexOf(next) + 1} of ${errors.length}`);
      await goTo(next);
    } catch (err) {
      fill(message, errorBox(err.message));
    } finally {
      ctx.ready(true);
    }
  }

  viewport.addEventListener("scroll", schedule, { passive: true });
  viewport.addEventListener("keydown", (e) => {
    if (e.key !== "ArrowDown" && e.key !== "ArrowUp") return;
    e.preventDefault();
    const next = Math.min(total - 1, Math.max(0, (selected ?? -1) + (e.key === "ArrowDown" ? 1 : -1)));
    goTo(next);
  });
  const onResize = () => schedule();
  window.addEventListener("resize", onResize);
  ctx.onCleanup(() => { window.removeEventListener("resize", onResize); cancelAnimationFrame(frame); });
  if (!total) rows.appendChild(h("p", { class: "muted pad" }, "This trajectory has no stored steps."));
  else render();
  if (step !== undefined && total) await goTo(Math.min(total, Math.max(1, Number(step))) - 1); // ?step=N: step N, as the row shows it
}

function firstLine(text) {
  const t = String(text ?? "");
  const line = t.split("\n").find((l) => l.trim()) ?? "";
  return line.length > 300 ? line.slice(0, 300) + "…" : line;
}

// A step with structure: its words, then each tool call as a block with the result tied to it
// (by call id; a lone call takes the step's observation); output no call claims comes last.
function stepBlocks(detail) {
  const calls = Array.isArray(detail.tool_calls) ? detail.tool_calls : [];
  const results = detail.tool_results && typeof detail.tool_results === "object" ? detail.tool_results : {};
  const tied = calls.some((c) => c && c.id && Object.prototype.hasOwnProperty.call(results, c.id));
  const lone = calls.length === 1 && !tied;
  return h("div", { class: "step-blocks" },
    detail.text ? h("pre", { class: "step-text", "data-testid": "step-text" }, String(detail.text)) : null,
    calls.map((c) => toolCallBlock(c, c && c.id && Object.prototype.hasOwnProperty.call(results, c.id) ? results[c.id]
      : lone && detail.observation ? detail.observation : null, { exitCode: calls.length === 1 ? detail.exit_code : null })),
    detail.observation && !lone && !tied ? h("div", { class: "tool-result", "data-testid": "step-observation" },
      h("div", { class: "tool-call-head" }, h("span", { class: "chip" }, calls.length ? "output of the calls above" : "output")),
      h("pre", { class: "tool-output" }, String(detail.observation))) : null);
}

// Per-step time and tokens, where the trajectory's format has them.
function stepMeta(metrics, previous) {
  const m = metrics && typeof metrics === "object" ? metrics : {};
  const facts = [];
  if (typeof m.timestamp === "string") {
    facts.push(h("span", { "data-testid": "step-time", title: m.timestamp }, m.timestamp.replace("T", " ").slice(0, 19)));
    const took = previous ? (Date.parse(m.timestamp) - Date.parse(previous)) / 1000 : NaN;
    if (Number.isFinite(took) && took >= 0) facts.push(h("span", { "data-testid": "step-took" }, `+${took.toFixed(1)} s since the step before`));
  }
  if (typeof m.prompt_tokens === "number") facts.push(h("span", { "data-testid": "step-prompt-tokens" }, `${fmtNum(m.prompt_tokens)} prompt tokens`));
  if (typeof m.completion_tokens === "number") facts.push(h("span", { "data-testid": "step-completion-tokens" }, `${fmtNum(m.completion_tokens)} completion tokens`));
  if (typeof m.cached_tokens === "number") facts.push(h("span", {}, `${fmtNum(m.cached_tokens)} cached`));
  if (typeof m.cost_usd === "number") facts.push(h("span", {}, `$${m.cost_usd.toFixed(4)}`));
  return facts.length ? h("div", { class: "step-meta muted small", "data-testid": "step-meta" }, facts) : null;
}
