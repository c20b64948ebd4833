// pages/selection.js — a select run: the pick and why, the candidates with their per-criterion
// rewards, the Bradley–Terry win mass (bars), the preference matrix (heatmap), and for a clicked
// pair every judgement with the exact prompts and label distributions of its model calls (and the
// thumbnails of the images each call sent).

import { api, trajectoryHref } from "../api.js";
import { barChart, heatmap, labelDistribution } from "../charts.js";
import { errorBox, fill, fmtNum, fmtPct, h, miniBar, shortNames } from "../dom.js";
import { thumbnails } from "../images.js";

const LOW_MASS = 0.5;

export async function selectionSection(ctx, run, body) {
  const sel = await api.selection(run.id);
  if (!ctx.alive) return;
  const byIndex = [...sel.candidates].sort((a, b) => a.index - b.index);
  const ids = byIndex.map((c) => c.id);
  const short = shortNames(ids);
  // One numbering everywhere: #<index> is the candidate's place in the input (the "index" of
  // select --json; for a proxied request, among the N asked for, a failed one keeping its number and
  // row), in the table, the charts, the matrix and the panels; its rank is shown apart.
  const name = (i) => `#${i} ${short[i] ?? "?"}`;
  const fullName = (i) => `#${i} ${ids[i] ?? "?"}`;
  const withSteps = new Set((run.trajectories || []).map((t) => t.trajectory));
  const best = byIndex.find((c) => c.index === sel.best);

  const panelSlot = h("div", { class: "panel-slot" }, h("div", { class: "card hint" },
    h("h2", {}, "Judgements"), h("p", { class: "muted" },
      "Click a cell of the heatmap to see the judgements of that pair: each model call's exact prompt, its label distribution and cost.")));

  let selectedCell = null;
  const openPair = (i, j, cellEl) => {
    if (selectedCell) selectedCell.classList.remove("selected");
    selectedCell = cellEl;
    if (cellEl) cellEl.classList.add("selected");
    fill(panelSlot, judgementPanel(ctx, sel, i, j, name, fullName, () => {
      if (selectedCell) selectedCell.classList.remove("selected");
      fill(panelSlot);
    }));
  };

  fill(body, h("div", { class: "selection", "data-testid": "selection-page" },
    pickCard(sel, best, name),
    sel.budget ? budgetCard(sel.budget) : null,
    candidatesTable(sel, byIndex, withSteps, run.id),
    h("div", { class: "evidence" },
      h("div", { class: "charts" },
        h("div", { class: "card" }, h("h2", {}, "Win mass (Bradley–Terry)"), winMass(sel, byIndex, name)),
        h("div", { class: "card" }, h("h2", {}, "Pairwise preferences"),
          h("p", { class: "muted small" }, "Mean P(row candidate beats column candidate) over all judgements of the pair."),
          (sel.position_bias || []).length ? h("p", { class: "small bias-note", "data-testid": "position-bias-note" },
            `⇄ ${sel.position_bias.length} pair(s) flip with the slot order (position bias): shown first, one side wins; `,
            `shown second, the other, ${fmtNum(sel.position_bias_gap ?? 0.5, 1)} or more apart. Their mean is not a close call.`) : null,
          sel.matrix && sel.matrix.length
            ? h("div", { class: "scroll-x" }, heatmap({ matrix: sel.matrix, rowLabels: byIndex.map((c) => name(c.index)),
              colLabels: byIndex.map((c) => `#${c.index}`), titles: ids.map((id, k) => `#${k} ${id}`), counts: sel.counts,
              orders: sel.orders, onCell: openPair }))
            : h("p", { class: "muted" }, "No pair was compared."))),
      panelSlot)));
}

function pickCard(sel, best, name) {
  const notes = sel.notes || [];
  const usage = sel.usage || {};
  return h("div", { class: "card pick" },
    h("div", { class: "kpis" },
      kpi(best ? name(best.index) : "none", "pick", best ? best.id : null, "pick"),
      kpi(fmtPct(sel.confidence, 0), "confidence it is the best", null, "confidence"),
      kpi(sel.decided ? "decided" : "not decided", `stop: ${sel.stop_reason ?? "—"}`, null, "decided",
        sel.decided ? "good" : "warn"),
      kpi(sel.method ?? "—", "method"),
      kpi(fmtNum((sel.judgements || []).length), `judgements · ${fmtNum(usage.model_calls ?? 0)} calls`)),
    sel.reason ? h("p", { class: "reason", "data-testid": "reason" }, sel.reason) : null,
    notes.length ? h("ul", { class: "notes" }, notes.map((n) => h("li", {}, String(n)))) : null,
    sel.task && sel.task.text ? h("details", { class: "task" }, h("summary", {}, `Task ${sel.task.id ?? ""}`),
      h("pre", { class: "wrap" }, sel.task.text)) : null);
}

// The cost controller's steps: what each added, why, and the budget spent and left after it.
function budgetCard(budget) {
  const steps = budget.steps || [];
  return h("div", { class: "card budget", "data-testid": "budget-steps" },
    h("h2", {}, `Budget ${budget.budget}: spent ${fmtNum(budget.spent)}, ${fmtNum(budget.left)} left`),
    h("p", { class: "muted small" }, `stop: ${budget.stop_reason ?? "—"} · cache hits do not count against the budget`),
    h("div", { class: "table-wrap" }, h("table", { class: "table" },
      h("thead", {}, h("tr", {}, ["step", "added", "why", "spent", "left", "confidence"].map((c) => h("th", {}, c)))),
      h("tbody", {}, steps.map((s) => h("tr", { "data-testid": "budget-step" },
        h("td", {}, s.step), h("td", {}, s.added), h("td", { class: "muted small" }, s.why),
        h("td", {}, fmtNum(s.spent)), h("td", {}, fmtNum(s.left)), h("td", {}, fmtPct(s.confidence, 0))))))));
}

function kpi(value, label, title, testid, tone) {
  return h("div", { class: ["kpi", tone ? `tone-${tone}` : null], title: title ?? null },
    h("div", { class: "kpi-value", "data-testid": testid ? `pick-${testid}` : null }, value),
    h("div", { class: "kpi-label" }, label));
}

function candidatesTable(sel, byIndex, withSteps, runId) {
  const criteria = sel.criteria || [];
  const ranked = [...byIndex].sort((a, b) => (a.rank ?? 1e9) - (b.rank ?? 1e9));
  const maxScore = Math.max(1e-9, ...ranked.map((c) => c.score ?? 0));
  return h("div", { class: "card" }, h("h2", {}, "Candidates"),
    h("div", { class: "table-wrap" }, h("table", { class: "table candidates" },
      h("thead", {}, h("tr", {}, h("th", {}, "rank"), h("th", { title: "the candidate's place in the input, as in the charts and the matrix" }, "#"),
        h("th", {}, "candidate"), h("th", {}, "win mass"),
        criteria.map((c) => h("th", {}, c)), h("th", {}, "labels"))),
      h("tbody", {}, ranked.map((c) => h("tr", { "data-testid": "candidate-row", "data-index": c.index,
        class: c.index === sel.best ? "best" : null },
      h("td", { class: "num" }, c.rank ?? "—"),
      h("td", { class: "num mono", "data-testid": "cand-number" }, `#${c.index}`),
      h("td", {}, h("div", { class: "cand-id" },
        withSteps.has(c.id) ? h("a", { href: trajectoryHref(runId, c.id), title: "open the trajectory" }, c.id) : h("span", {}, c.id),
        c.index === sel.best ? h("span", { class: "chip st-ok" }, "pick") : null,
        c.failed ? h("span", { class: "chip st-failed", "data-testid": "failed-chip", title: String(c.error ?? "") }, "failed") : null,
        injectionChip(c.injection_span)),
      c.source ? h("div", { class: "muted small" }, c.source) : null),
      h("td", { class: "barcell" }, miniBar(c.score, { max: maxScore }), h("span", { class: "num" }, fmtNum(c.score))),
      criteria.map((k) => {
        const v = (c.criteria || {})[k];
        return h("td", { class: "barcell" }, miniBar(v), h("span", { class: "num" }, v === null || v === undefined ? "—" : v.toFixed(3)));
      }),
      h("td", {}, Object.entries(c.labels || {}).map(([k, v]) => h("span", { class: "chip" }, `${k} ${v}`)))))))));
}

/** A warning chip for a candidate the injection detector suspects; its title is the span that triggered it. */
export function injectionChip(span) {
  if (!span || typeof span !== "object") return null;
  return h("span", { class: "chip injection", "data-testid": "injection-flag", title: `${span.rule}: ${span.text}` },
    "injection suspected");
}

function winMass(sel, byIndex, name) {
  const ranked = byIndex.filter((c) => !c.failed).sort((a, b) => (a.rank ?? 1e9) - (b.rank ?? 1e9));
  const best = byIndex.find((c) => c.index === sel.best);
  const caption = best ? `confidence ${fmtPct(sel.confidence)} that ${name(best.index)} is the best${sel.decided ? "" : " · not decided"}` : "no pick";
  return barChart(ranked.map((c) => ({ label: name(c.index), title: c.id, value: c.score, highlight: c.index === sel.best })), {
    width: 480, caption, reference: ranked.length ? { value: 1 / ranked.length, label: "1/N" } : null,
    attrs: { "data-testid": "winmass-chart", class: "chart winmass" },
  });
}

// -- the judgement panel ---------------------------------------------------------------------

function judgementPanel(ctx, sel, i, j, name, fullName, close) {
  const judgements = (sel.judgements || []).filter((jd) => (jd.i === i && jd.j === j) || (jd.i === j && jd.j === i));
  const mean = sel.matrix?.[i]?.[j];
  const list = h("div", { class: "judgements" });
  const panel = h("div", { class: "card panel", "data-testid": "judgement-panel", "data-i": i, "data-j": j },
    h("div", { class: "panel-head" }, h("h2", { "data-testid": "pair-names" }, `${fullName(i)} vs ${fullName(j)}`),
      h("button", { class: "ghost", onclick: close, "aria-label": "close" }, "×")),
    h("p", {}, "P(", h("strong", {}, name(i)), " beats ", h("strong", {}, name(j)), ") = ",
      h("strong", { "data-testid": "pair-mean" }, typeof mean === "number" ? mean.toFixed(3) : "—"),
      h("span", { class: "muted" }, ` · ${judgements.length} judgement(s), shown from ${name(i)}'s side`)),
    slotOrders(sel.orders?.[i]?.[j], i, j, name),
    list);
  judgements.forEach((jd, k) => list.appendChild(judgementCard(ctx, sel, jd, i, j, name, k === 0)));
  if (!judgements.length) list.appendChild(h("p", { class: "muted" }, "No judgement of this pair was recorded."));
  return panel;
}

// P(i beats j) in each slot order, and the position-bias warning when the two flip the verdict.
function slotOrders(order, i, j, name) {
  if (!order) return null;
  const v = (p) => (typeof p === "number" ? p.toFixed(4) : "not judged");
  return h("div", { class: ["slot-orders", order.position_bias ? "biased" : null], "data-testid": "slot-orders" },
    h("table", { class: "table compact" },
      h("thead", {}, h("tr", {}, h("th", {}, "shown first"), h("th", {}, `P(${name(i)} beats ${name(j)})`), h("th", {}, "judgements"))),
      h("tbody", {},
        h("tr", {}, h("td", {}, name(i)), h("td", { class: "num", "data-testid": "order-first" }, v(order.first)), h("td", { class: "num" }, order.n_first)),
        h("tr", {}, h("td", {}, name(j)), h("td", { class: "num", "data-testid": "order-second" }, v(order.second)), h("td", { class: "num" }, order.n_second)))),
    order.position_bias
      ? h("p", { class: "bias-warning", "data-testid": "position-bias", role: "note" }, h("strong", {}, "⇄ Position bias. "),
        "The verdict flips with the slot order: each order names a different winner. ",
        `The mean ${typeof order.first === "number" && typeof order.second === "number" ? ((order.first + order.second) / 2).toFixed(3) : ""} `,
        "averages two opposite verdicts; it does not say the pair is close.")
      : null);
}

function judgementCard(ctx, sel, jd, i, j, name, open) {
  const same = jd.i === i;
  const p = same ? jd.p : 1 - jd.p;
  const criteria = Object.keys(jd.rewards || {});
  const calls = h("div", { class: "calls" });
  const details = h("details", { class: "judgement", "data-testid": "judgement", "data-n": jd.n, open },
    h("summary", {}, h("span", { class: "jd-title" }, `judgement ${jd.n}`),
      h("span", { class: "chip" }, `repeat ${jd.repeat}`),
      h("span", { class: "jd-p" }, `P = ${typeof p === "number" ? p.toFixed(3) : "—"}`),
      h("span", { class: "muted small" }, `judged as ${name(jd.i)} vs ${name(jd.j)}${same ? "" : " (flipped here)"}`),
      typeof jd.repeat === "number" ? h("span", { class: "chip", "data-testid": "shown-first" },
        `${name(jd.repeat % 2 === 0 ? jd.i : jd.j)} shown first`) : null),
    criteria.length ? h("table", { class: "table compact rewards" },
      h("thead", {}, h("tr", {}, h("th", {}, "criterion"), h("th", {}, name(i)), h("th", {}, name(j)))),
      h("tbody", {}, criteria.map((c) => {
        const pair = jd.rewards[c] || [];
        const [a, b] = same ? pair : [pair[1], pair[0]];
        return h("tr", {}, h("td", {}, c),
          h("td", { class: "barcell" }, miniBar(a), h("span", { class: "num" }, fmtNum(a))),
          h("td", { class: "barcell" }, miniBar(b), h("span", { class: "num" }, fmtNum(b))));
      }))) : null,
    calls);
  let loaded = false;
  const load = async () => {
    if (loaded) return;
    loaded = true;
    const keys = jd.calls || [];
    if (!keys.length) {
      fill(calls, h("p", { class: "muted" }, "No model call was recorded for this judgement."));
      return;
    }
    ctx.ready(false);
    const slots = keys.map(() => h("div", { class: "call-slot" }, h("p", { class: "muted" }, "loading call…")));
    fill(calls, h("h3", {}, `${keys.length} model call(s)`), slots);
    await Promise.all(keys.map(async (key, k) => {
      try {
        const call = await api.call(key);
        fill(slots[k], callDetail(call, k + 1));
      } catch (err) {
        fill(slots[k], errorBox(err.message));
      }
    }));
    ctx.ready(true);
  };
  details.addEventListener("toggle", () => { if (details.open) load(); });
  if (open) queueMicrotask(load);
  return details;
}

function callDetail(call, n) {
  const last = (call.messages || []).slice(-1)[0];
  const criterion = last && typeof last.content === "string" ? (last.content.match(/## Criterion: ([^\n]+)/) || [])[1] : null;
  const mass = call.label_mass;
  const low = typeof mass === "number" && mass < LOW_MASS;
  const cost = call.cost || {};
  const top = Object.entries(call.label_probs || {}).sort((a, b) => b[1] - a[1])[0];
  return h("div", { class: "call", "data-testid": "call-detail", "data-key": call.key },
    h("div", { class: "call-head" },
      h("strong", {}, `call ${n}`), h("span", { class: "chip" }, call.kind ?? "call"),
      criterion ? h("span", { class: "chip" }, criterion) : null,
      call.status && call.status !== "ok" ? h("span", { class: "chip st-failed" }, call.status) : null,
      low ? h("span", { class: "chip st-failed", "data-testid": "low-mass" }, "low label mass") : null,
      h("span", { class: "muted small mono" }, `${String(call.key).slice(0, 12)}…`)),
    call.error ? errorBox(call.error) : null,
    h("div", { class: "call-body" },
      h("div", { class: "call-dist" },
        call.labels || call.label_probs ? labelDistribution(call.labels, call.label_probs) : h("p", { class: "muted" }, "no label distribution"),
        h("dl", { class: "facts small" },
          fact("top label", top ? `${top[0]} (${fmtPct(top[1], 1)})` : "—"),
          fact("label mass", h("span", { class: low ? "bad" : null, "data-testid": "label-mass" }, fmtNum(mass))),
          fact("unseen mass", fmtNum(call.unseen_mass)),
          fact("prompt tokens", `${fmtNum(cost.prompt_tokens ?? 0)}${cost.cached_tokens ? ` (${fmtNum(cost.cached_tokens)} cached)` : ""}`),
          fact("completion", fmtNum(cost.completion_tokens ?? 0)),
          fact("latency", typeof cost.latency_s === "number" ? `${cost.latency_s.toFixed(2)} s` : "—")),
        callImages(call.images)),
      h("div", { class: "call-prompt" },
        (call.messages || []).map((m) => h("div", { class: "message" },
          h("div", { class: "role" }, m.role),
          h("pre", { class: "prompt", "data-testid": "prompt-text", "data-role": m.role }, typeof m.content === "string" ? m.content : JSON.stringify(m.content, null, 2)))),
        call.prefill ? h("div", { class: "message" }, h("div", { class: "role" }, "prefill"),
          h("pre", { class: "prompt prefill", "data-testid": "prefill" }, call.prefill)) : null,
        call.reasoning ? h("div", { class: "message" }, h("div", { class: "role" }, "reasoning"), h("pre", { class: "prompt" }, String(call.reasoning))) : null,
        call.text ? h("div", { class: "message" }, h("div", { class: "role" }, "answer"), h("pre", { class: "prompt" }, String(call.text))) : null)));
}

// The images the call sent, in the order its prompt holds them, each with the label it gave it.
function callImages(images) {
  const strip = thumbnails(images);
  return strip ? h("div", { class: "call-images-box" }, h("h4", {}, `${images.length} image(s) sent`), strip) : null;
}

function fact(label, value) {
  return h("div", {}, h("dt", {}, label), h("dd", {}, value));
}
