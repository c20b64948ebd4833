// pages/run.js — #/runs/<id>: the run's header (command, status, cost, trajectories, children)
// and the page its "view" names: selection, progress, harness, or the plain verdict/other page.

import { api, trajectoryHref } from "../api.js";
import { errorBox, fill, fmtDuration, fmtNum, fmtTime, h, pretty, statusChip } from "../dom.js";
import { sectionThumbnails } from "../images.js";
import { harnessSection } from "./harness.js";
import { progressSection } from "./progress.js";
import { proxySection } from "./proxy.js";
import { injectionChip, selectionSection } from "./selection.js";

const SECTIONS = { selection: selectionSection, progress: progressSection, harness: harnessSection, proxy: proxySection };

export async function runPage(ctx, id) {
  const run = await api.run(id);
  if (!ctx.alive) return;
  const body = h("div", { class: "run-body" });
  const header = runHeader(run);
  fill(ctx.root, h("section", { class: "page", "data-testid": "run-page", "data-run-id": run.id }, header, body));
  const section = SECTIONS[run.view];
  if (section) {
    try {
      await section(ctx, run, body, header);
      return;
    } catch (err) {
      if (!ctx.alive) return;
      fill(body, errorBox(err.message), plainSection(run));
      return;
    }
  }
  fill(body, plainSection(run));
}

export function runHeader(run) {
  const cost = run.cost || {};
  const facts = [
    ["status", statusChip(run.status, { "data-testid": "run-status" })],
    ["model", run.model ?? "—"],
    ["started", fmtTime(run.created_at)],
    ["took", run.status === "running" ? "running…" : fmtDuration(run.created_at, run.finished_at)],
    ["calls", h("span", { "data-testid": "run-calls" }, `${fmtNum(cost.calls ?? 0)}${cost.cache_hits ? ` (${fmtNum(cost.cache_hits)} cached)` : ""}${cost.failed ? `, ${fmtNum(cost.failed)} failed` : ""}`)],
    ["tokens", h("span", { "data-testid": "run-tokens", title: "prompt tokens sent · completion tokens" },
      `${fmtNum(cost.prompt_tokens ?? 0)} prompt · ${fmtNum(cost.completion_tokens ?? 0)} completion`)],
  ];
  const steps = (run.trajectories || []).reduce((n, t) => n + (t.steps || 0), 0);
  if ((run.trajectories || []).length) facts.push(["steps", h("span", { "data-testid": "run-steps" }, fmtNum(steps))]);
  if (run.job !== null && run.job !== undefined) facts.push(["job", h("a", { href: "#/jobs" }, `#${run.job}`)]);
  const trajectories = run.trajectories || [];
  const result = run.result;
  const error = result && typeof result === "object" && !Array.isArray(result) ? result.error : null;
  return h("header", { class: "run-head" },
    h("div", { class: "crumbs" }, h("a", { href: "#/runs" }, "Runs"), " / ", `#${run.id}`),
    h("h1", {}, h("code", {}, run.command), " ", h("span", { class: "muted" }, `run #${run.id}`)),
    run.summary ? h("p", { class: "summary-line", "data-testid": "run-summary" }, run.summary) : null,
    error ? errorBox(typeof error === "string" ? error : pretty(error)) : null,
    h("dl", { class: "facts" }, facts.map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, v)))),
    trajectories.length ? h("div", { class: "trajectories" }, h("span", { class: "muted" }, "Trajectories: "),
      trajectories.map((t) => h("a", { class: "chip link", href: trajectoryHref(run.id, t.trajectory), "data-testid": "trajectory-link" },
        t.trajectory, h("span", { class: "muted" }, ` · ${t.steps} steps${t.errors ? ` · ${t.errors} errors` : ""}`)))) : null,
    run.children && run.children.length ? h("div", { class: "children" }, h("span", { class: "muted" }, "Tasks: "),
      run.children.map((c) => h("a", { class: "chip link", href: `#/runs/${c.id}` }, `#${c.id} `, c.summary || c.command, " ", statusChip(c.status)))) : null);
}

/** The summary, args and result as pretty JSON text (verdict, other, and any page that failed). */
export function plainSection(run) {
  const result = run.result;
  return h("div", { class: "plain", "data-testid": "plain-page" },
    verdictCard(run),
    h("div", { class: "grid-2" },
      h("div", { class: "card" }, h("h2", {}, "Arguments"), h("pre", { class: "json", "data-testid": "run-args" }, pretty(run.args))),
      h("div", { class: "card" }, h("h2", {}, "Result"), h("pre", { class: "json", "data-testid": "run-result" },
        result === null || result === undefined ? "no result recorded (still running, or stopped before it had one)" : pretty(result)))));
}

function verdictCard(run) {
  const r = run.result;
  if (!r || typeof r !== "object") return null;
  const rows = [];
  if (run.command === "score" && typeof r.reward === "number") rows.push(["reward", r.reward]);
  if (run.command === "compare" && typeof r.p_a_wins === "number") {
    rows.push(["P(A beats B)", r.p_a_wins]);
    if (typeof r.reward_a === "number") rows.push(["reward A", r.reward_a]);
    if (typeof r.reward_b === "number") rows.push(["reward B", r.reward_b]);
  }
  if (!rows.length) return null;
  const spans = r.injection && typeof r.injection === "object"
    ? Object.entries(r.injection).filter(([k, v]) => k !== "detector" && v && typeof v === "object") : [];
  return h("div", { class: "card verdict" }, h("h2", {}, "Verdict"),
    h("div", { class: "kpis" }, rows.map(([k, v]) => h("div", { class: "kpi" }, h("div", { class: "kpi-value" }, v.toFixed(3)),
      h("div", { class: "kpi-label" }, k)))),
    spans.length ? h("p", { class: "injection-line", "data-testid": "verdict-injection" },
      spans.map(([who, span]) => h("span", {}, injectionChip(span), " ", h("span", { class: "muted" }, `${who}: `),
        h("code", {}, span.text)))) : null,
    sectionThumbnails(r.images));  // the images the verdict saw, by section (none: nothing shown)
}
