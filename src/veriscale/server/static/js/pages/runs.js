// pages/runs.js — #/runs: every top-level run, filtered by kind, status, score and cost, sorted
// and paged by the server (50 a page), so a store of 10,000 runs costs one small query a page.

import { api } from "../api.js";
import { debounce, errorBox, fill, fmtDuration, fmtTime, h, statusChip } from "../dom.js";

const PAGE = 50;
const COMMANDS = ["select", "track", "track --follow", "score", "compare", "harness run", "bench"];
const STATUSES = ["running", "ok", "failed", "interrupted", "cancelled"];

const SORTS = [["id:desc", "newest first"], ["id:asc", "oldest first"], ["score:desc", "highest score"],
  ["score:asc", "lowest score"], ["cost:desc", "most tokens"], ["cost:asc", "fewest tokens"]];
const RANGES = [["min_score", "score ≥", "0.01"], ["max_score", "score ≤", "0.01"], ["min_cost", "tokens ≥", "1"], ["max_cost", "tokens ≤", "1"]];

// kept while the page is left and come back to
const state = { command: "", status: "", q: "", sort: "id:desc", min_score: "", max_score: "", min_cost: "", max_cost: "", offset: 0 };

export async function runsPage(ctx) {
  const total = h("span", { class: "muted", "data-testid": "runs-total" }, "");
  const body = h("tbody", {});
  const pager = h("div", { class: "pager" });
  const message = h("div", {});
  let seq = 0;

  const options = (values, current, all) => [h("option", { value: "" }, all),
    ...values.map((v) => h("option", { value: v, selected: v === current }, v))];
  const command = h("select", { "aria-label": "command", onchange: () => { state.command = command.value; reload(true); } },
    options(COMMANDS, state.command, "all commands"));
  const status = h("select", { "aria-label": "status", onchange: () => { state.status = status.value; reload(true); } },
    options(STATUSES, state.status, "any status"));
  const search = h("input", { type: "search", placeholder: "Search command, model, args, result or id…",
    "data-testid": "runs-search", value: state.q, "aria-label": "search runs" });
  const onSearch = debounce(() => { state.q = search.value.trim(); reload(true); }, 250);
  search.addEventListener("input", onSearch);
  ctx.onCleanup(onSearch.cancel);
  const sort = h("select", { "aria-label": "sort", "data-testid": "runs-sort", onchange: () => { state.sort = sort.value; reload(true); } },
    SORTS.map(([v, label]) => h("option", { value: v, selected: v === state.sort }, label)));
  const onRange = debounce(() => reload(true), 250);
  ctx.onCleanup(onRange.cancel);
  const ranges = RANGES.map(([key, label, step]) => {
    const input = h("input", { type: "number", min: 0, step, value: state[key], class: "range-input", "aria-label": label,
      "data-testid": `runs-${key.replace("_", "-")}`, placeholder: label });
    input.addEventListener("input", () => { state[key] = input.value.trim(); onRange(); });
    return input;
  });

  const table = h("table", { class: "table runs", "data-testid": "runs-table" },
    h("thead", {}, h("tr", {}, ["#", "command", "status", "score", "model", "started", "took", "cost", "summary"].map((c) => h("th", {}, c)))),
    body);

  fill(ctx.root, h("section", { class: "page", "data-testid": "runs-page" },
    h("div", { class: "page-head" }, h("h1", {}, "Runs"), total),
    h("div", { class: "toolbar" }, command, status, search, sort, ...ranges),
    message, h("div", { class: "table-wrap" }, table), pager));

  async function reload(fromStart) {
    if (!ctx.alive) return;
    if (fromStart) state.offset = 0;
    const mine = ++seq;
    ctx.ready(false);
    let page;
    try {
      const [by, order] = state.sort.split(":");
      page = await api.runs({ command: state.command, status: state.status, q: state.q, sort: by, order,
        min_score: state.min_score, max_score: state.max_score, min_cost: state.min_cost, max_cost: state.max_cost,
        offset: state.offset, limit: PAGE });
    } catch (err) {
      if (mine !== seq || !ctx.alive) return;
      fill(message, errorBox(err.message));
      ctx.ready(true);
      return;
    }
    if (mine !== seq || !ctx.alive) return;
    fill(message);
    fill(total, `${page.total.toLocaleString("en-US")} run${page.total === 1 ? "" : "s"}`);
    fill(body, ...page.runs.map(row));
    if (!page.runs.length) {
      const filtered = state.q || state.command || state.status || RANGES.some(([key]) => state[key]);
      fill(body, h("tr", {}, h("td", { colspan: 9, class: "empty" },
        filtered ? "No run matches these filters." : "No runs yet: submit a job on the Jobs page.")));
    }
    const first = page.total ? page.offset + 1 : 0;
    const last = page.offset + page.runs.length;
    fill(pager,
      h("button", { disabled: page.offset === 0, onclick: () => { state.offset = Math.max(0, state.offset - PAGE); reload(); } }, "‹ Newer"),
      h("span", { class: "muted" }, `${first.toLocaleString("en-US")}–${last.toLocaleString("en-US")} of ${page.total.toLocaleString("en-US")}`),
      h("button", { disabled: last >= page.total, onclick: () => { state.offset += PAGE; reload(); } }, "Older ›"));
    ctx.ready(true);
  }

  await reload(false);
}

function row(run) {
  const open = () => { location.hash = `#/runs/${run.id}`; };
  return h("tr", { class: "clickable", "data-testid": "run-row", "data-run-id": run.id, onclick: open },
    h("td", { class: "num" }, h("a", { href: `#/runs/${run.id}` }, String(run.id))),
    h("td", {}, h("code", {}, run.command)),
    h("td", {}, statusChip(run.status)),
    h("td", { class: "num nowrap", "data-testid": "run-score", title: run.score_label ?? "no score" },
      typeof run.score === "number" ? run.score.toFixed(3) : "—",
      run.score_label ? h("span", { class: "muted small" }, ` ${run.score_label}`) : null),
    h("td", { class: "muted model" }, run.model ?? "—"),
    h("td", { class: "muted nowrap" }, fmtTime(run.created_at)),
    h("td", { class: "muted nowrap" }, run.status === "running" ? "…" : fmtDuration(run.created_at, run.finished_at)),
    h("td", { class: "muted cost", "data-testid": "run-cost", "data-tokens": run.cost?.tokens ?? null,
      title: run.cost ? `${Number(run.cost.tokens ?? 0).toLocaleString("en-US")} tokens (prompt sent + completion)` : null }, costText(run.cost)),
    h("td", { class: "summary" }, h("span", { class: "clamp", title: run.summary || null }, run.summary ?? "")));
}

/** "12 calls · 9,800 sent / 2,100 processed tok · $0.0012" as parts that each stay on one line (the cell
 *  wraps between them); processed reads "?" where a server did not say; the title holds the tokens
 *  (sent + completion) that the cost sort and filter count. */
function costText(cost) {
  if (!cost) return "—";
  const n = (v) => (v === null || v === undefined ? "?" : Number(v).toLocaleString("en-US"));
  const parts = [`${n(cost.calls)} call${cost.calls === 1 ? "" : "s"}` + (cost.cache_hits ? ` (+${n(cost.cache_hits)} cached)` : "")];
  if (cost.calls) parts.push(`${n(cost.prompt_tokens)} sent / ${n(cost.prompt_tokens_processed)} processed tok`);
  if (cost.money) parts.push(cost.money.usd === null ? "$?" : `$${cost.money.usd.toFixed(4)}${cost.money.exact ? "" : " (at most)"}`);
  return parts.flatMap((part, i) => [i ? " · " : null, h("span", { class: "nowrap" }, part)]);
}
