// pages/progress.js — a track run: one SVG progress curve per trajectory with its events and
// VOC, and under it a filmstrip of each checkpoint's frames (its point's `frames`), if any; a click on a curve's point opens the trajectory at that step. While the run is running
// the page follows /api/runs/<id>/stream (EventSource), grows the charts in place and refreshes
// the header's counters (calls, tokens, steps) as the points come; on "end" it reloads the run.

import { api, trajectoryHref } from "../api.js";
import { progressChart } from "../charts.js";
import { fill, fmtNum, fmtPct, h, statusChip } from "../dom.js";
import { filmstrip } from "../images.js";
import { runHeader } from "./run.js";

const HEADER_REFRESH_MS = 1000; // at most this often the live header is read again

export async function progressSection(ctx, run, body, header) {
  const view = await api.progress(run.id);
  if (!ctx.alive) return;
  const stepsOf = new Map((run.trajectories || []).map((t) => [t.trajectory, t.steps]));
  const curves = new Map(); // trajectory -> {data, chart, card}
  const list = h("div", { class: "curves" });
  const callsBox = h("div", { class: "calls-box", "data-testid": "calls-progress" });
  const liveBox = h("span", { class: "live" });
  const vocBox = h("div", {});

  const renderCalls = (calls) => {
    if (!calls) {
      fill(callsBox, h("span", { class: "muted" }, view.status === "running" ? "calls: waiting for the first…" : ""));
      return;
    }
    const frac = calls.planned ? Math.min(1, calls.done / calls.planned) : 0;
    const fillEl = h("span", { class: "progress-fill" });
    fillEl.style.width = `${(frac * 100).toFixed(1)}%`;
    fill(callsBox, h("span", {}, `calls ${fmtNum(calls.done)} / ${fmtNum(calls.planned)}`), h("span", { class: "progress-bar" }, fillEl));
  };

  const addCurve = (data) => {
    const chart = progressChart(data.trajectory);
    const strip = filmstrip(data.trajectory);
    const vocEl = h("span", { class: "chip" });
    const eventsEl = h("ul", { class: "events" });
    const stats = h("span", { class: "muted small" });
    const name = data.trajectory;
    const card = h("div", { class: "card curve-card" },
      h("div", { class: "curve-head" },
        h("h2", {}, stepsOf.has(name) ? h("a", { href: trajectoryHref(run.id, name), title: "open the trajectory" }, name) : name),
        vocEl, stats,
        stepsOf.has(name) ? h("a", { class: "button small", href: trajectoryHref(run.id, name) }, "steps →") : null),
      h("div", { class: "scroll-x" }, chart.svg), strip.el, eventsEl);
    chart.svg.classList.add("linked-points");
    // the filmstrip marks the frames of the hovered point (and the point of the hovered frames)
    const markPoint = (step) => {
      strip.mark(step);
      for (const c of chart.svg.querySelectorAll("[data-testid=curve-point]")) c.classList.toggle("current", c.dataset.step === String(step));
    };
    chart.svg.addEventListener("mouseover", (e) => {
      const point = e.target.closest("[data-testid=curve-point]");
      if (point) markPoint(point.dataset.step);
    });
    strip.el.addEventListener("frame-hover", (e) => markPoint(e.detail));
    chart.svg.addEventListener("click", (e) => {  // a checkpoint's point opens the trajectory at its step
      const point = e.target.closest("[data-testid=curve-point]");
      if (point && stepsOf.has(name)) location.hash = trajectoryHref(run.id, name, point.dataset.step);
    });
    const entry = { data, chart, card, vocEl, eventsEl, stats, strip };
    curves.set(name, entry);
    list.appendChild(card);
    draw(entry);
    return entry;
  };

  const draw = (entry) => {
    const d = entry.data;
    entry.chart.update({ points: d.points, events: d.events, nSteps: Math.max(d.n_steps || 0, stepsOf.get(d.trajectory) || 0) });
    entry.strip.update(d.points);
    fill(entry.vocEl, `VOC ${typeof d.voc === "number" ? d.voc.toFixed(3) : "—"}`);
    const last = [...d.points].reverse().find((p) => typeof p.value === "number");
    fill(entry.stats, `${d.points.length} checkpoint(s)${last ? ` · last ${fmtPct(last.value)} at step ${last.step}` : ""}` +
      (d.outcome !== undefined && d.outcome !== null ? ` · outcome ${d.outcome}` : ""));
    fill(entry.eventsEl, d.events.map((e) => h("li", { class: `ev-${["stall", "regression", "likely_done"].includes(e.kind) ? e.kind : "other"}` },
      h("strong", {}, String(e.kind ?? "event").replace("_", " ")), ` · step ${e.step} · `, e.message ?? "")));
  };

  // Live points can arrive in bursts (a stream catching up): redraw each curve once per frame.
  const pending = new Set();
  const schedule = (entry) => {
    if (!pending.size) requestAnimationFrame(() => { for (const e of pending) draw(e); pending.clear(); });
    pending.add(entry);
  };

  const curveFor = (name) => curves.get(name) || addCurve({ trajectory: name, points: [], events: [], voc: null, n_steps: 0 });

  fill(body, h("div", { class: "progress", "data-testid": "progress-page" },
    h("div", { class: "card toolbar-card" }, liveBox, callsBox, vocBox), list));
  for (const c of view.curves || []) addCurve({ ...c, points: [...(c.points || [])], events: [...(c.events || [])] });
  if (!(view.curves || []).length) list.appendChild(h("p", { class: "muted empty-curves" }, "No checkpoint scored yet."));
  renderCalls(view.calls);
  renderVoc(vocBox, view.voc_by_outcome);

  if (view.status !== "running") {
    fill(liveBox, statusChip(view.status));
    return;
  }
  fill(liveBox, h("span", { class: "chip st-running", "data-testid": "live" }, "● live"));
  const source = new EventSource(api.streamUrl(run.id, view.last_event));
  ctx.onCleanup(() => source.close());
  const on = (kind, fn) => source.addEventListener(kind, (e) => {
    if (!ctx.alive) return;
    let data;
    try { data = JSON.parse(e.data); } catch { return; }
    fn(data);
  });
  // The header's calls, tokens and steps, read again as the curve grows (throttled, one read at a time).
  let headerTimer = null;
  let headerBusy = false;
  ctx.onCleanup(() => clearTimeout(headerTimer));
  const refreshHeader = () => {
    if (headerTimer !== null) return;
    headerTimer = setTimeout(async () => {
      if (headerBusy || !ctx.alive) { headerTimer = null; return; }
      headerBusy = true;
      try {
        const fresh = await api.run(run.id);
        if (!ctx.alive || fresh.status !== "running") return; // "end" reloads the finished run
        for (const t of fresh.trajectories || []) stepsOf.set(t.trajectory, t.steps);
        const freshHeader = runHeader(fresh);
        header.replaceWith(freshHeader);
        header = freshHeader;
      } catch { /* the stream's own reconnect says when the server is gone */ } finally {
        headerBusy = false;
        headerTimer = null;
      }
    }, HEADER_REFRESH_MS);
  };
  on("point", (d) => {
    refreshHeader();
    list.querySelector(".empty-curves")?.remove();
    const entry = curveFor(String(d.trajectory ?? ""));
    entry.data.points.push(d.point);
    entry.data.n_steps = Math.max(entry.data.n_steps || 0, d.point.step || 0);
    if (d.voc !== undefined) entry.data.voc = d.voc;
    schedule(entry);
  });
  on("event", (d) => {
    const entry = curveFor(String(d.trajectory ?? ""));
    entry.data.events.push(d.event);
    schedule(entry);
  });
  on("calls", (d) => { renderCalls(d); refreshHeader(); });
  on("status", (d) => {
    fill(liveBox, h("span", { class: "chip st-running" }, "● live"), " job ", statusChip(d.status), d.error ? h("span", { class: "bad" }, ` ${d.error}`) : null);
  });
  on("end", async () => {
    source.close();
    ctx.ready(false);
    try {
      const fresh = await api.run(run.id);
      if (!ctx.alive) return;
      const freshHeader = runHeader(fresh);
      header.replaceWith(freshHeader);
      await progressSection(ctx, fresh, body, freshHeader);
    } finally {
      ctx.ready(true);
    }
  });
  source.onerror = () => {
    if (ctx.alive && source.readyState === EventSource.CONNECTING) fill(liveBox, h("span", { class: "chip st-interrupted" }, "reconnecting…"));
  };
  source.onopen = () => {
    if (ctx.alive) fill(liveBox, h("span", { class: "chip st-running", "data-testid": "live" }, "● live"));
  };
}

function renderVoc(box, byOutcome) {
  if (!byOutcome) return;
  fill(box, h("span", { class: "muted" }, "VOC by outcome: "), Object.entries(byOutcome).map(([k, v]) =>
    h("span", { class: "chip", title: "mean VOC of the trajectories with this outcome" },
      `${k} ${v && typeof v.mean_voc === "number" ? v.mean_voc.toFixed(3) : "—"} (n=${v ? v.n : 0}${v && v.undefined ? `, ${v.undefined} without a VOC` : ""})`)));
}
