// pages/runs.js — #/runs: every top-level run, newest first, filtered and paged by the server
// (50 a page), so a store of 10,000 runs costs one small query a page.

import { api } from "../api.js";
import { debounce, errorBox, fill, fmtDuration, fmtTime, h, statusChip } from "../dom.js";

const PAGE = 50;
const COMMANDS = ["select", "track", "track --follow", "score", "compare", "harness run", "bench"];
const STATUSES = ["running", "ok", "failed", "interrupted", "cancelled"];

// kept while the page is left and come back to
const state = { command: "", status: "", q: "", offset: 0 };

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

  const table = h("table", { class: "table runs", "data-testid": "runs-table" },
    h("thead", {}, h("tr", {}, ["#", "command", "status", "model", "started", "took", "cost", "summary"].map((c) => h("th", {}, c)))),
    body);

  fill(ctx.root, h("section", { class: "page", "data-testid": "runs-page" },
    h("div", { class: "page-head" }, h("h1", {}, "Runs"), total),
    h("div", { class: "toolbar" }, command, status, search),
    message, h("div", { class: "table-wrap" }, table), pager));

  async function reload(fromStart) {
    if (!ctx.alive) return;
    if (fromStart) state.offset = 0;
    const mine = ++seq;
    ctx.ready(false);
    let page;
    try {
      page = await api.runs({ command: state.command, status: state.status, q: state.q, offset: state.offset, limit: PAGE });
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
      fill(body, h("tr", {}, h("td", { colspan: 8, class: "empty" },
        state.q || state.command || state.status ? "No run matches these filters." : "No runs yet: submit a job on the Jobs page.")));
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
    h("td", { class: "muted" }, run.model ?? "—"),
    h("td", { class: "muted nowrap" }, fmtTime(run.created_at)),
    h("td", { class: "muted nowrap" }, run.status === "running" ? "…" : fmtDuration(run.created_at, run.finished_at)),
    h("td", { class: "muted nowrap", "data-testid": "run-cost" }, costText(run.cost)),
    h("td", { class: "summary" }, run.summary ?? ""));
}

/** "12 calls · 9,800 sent / 2,100 processed tok · $0.0012": processed reads "?" where a server did not say. */
function costText(cost) {
  if (!cost) return "—";
  const n = (v) => (v === null || v === undefined ? "?" : Number(v).toLocaleString("en-US"));
  let text = `${n(cost.calls)} call${cost.calls === 1 ? "" : "s"}`;
  if (cost.cache_hits) text += ` (+${n(cost.cache_hits)} cached)`;
  if (cost.calls) text += ` · ${n(cost.prompt_tokens)} sent / ${n(cost.prompt_tokens_processed)} processed tok`;
  if (cost.money) text += cost.money.usd === null ? " · $?" : ` · $${cost.money.usd.toFixed(4)}${cost.money.exact ? "" : " (at most)"}`;
  return text;
}
