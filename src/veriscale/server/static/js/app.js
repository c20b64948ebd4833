// app.js — the dashboard's entry: header (model, embedded-model banner) and the hash router.
//   #/runs   #/runs/<id>   #/runs/<id>/trajectory/<name>[?step=N]   #/jobs

import { api } from "./api.js";
import { errorBox, fill, h, setReady } from "./dom.js";
import { jobsPage } from "./pages/jobs.js";
import { runPage } from "./pages/run.js";
import { runsPage } from "./pages/runs.js";
import { trajectoryPage } from "./pages/trajectory.js";

const ROUTES = [
  { pattern: /^#\/runs\/?$/, nav: "runs", page: runsPage },
  { pattern: /^#\/runs\/(\d+)\/trajectory\/([^?]+)(?:\?step=(\d+))?$/, nav: "runs", page: trajectoryPage },
  { pattern: /^#\/runs\/(\d+)\/?$/, nav: "runs", page: runPage },
  { pattern: /^#\/jobs\/?$/, nav: "jobs", page: jobsPage },
];

const root = document.getElementById("app");
let current = null; // the page context now shown

/** What a page gets: its root, a way to register cleanups, and whether it is still shown. */
function pageContext() {
  const cleanups = [];
  const ctx = {
    root,
    onCleanup: (fn) => cleanups.push(fn),
    get alive() { return current === ctx; },
    /** body[data-ready] for this page: ignored once another page is shown. */
    ready(flag) { if (current === ctx) setReady(flag); },
    close() {
      while (cleanups.length) {
        try { cleanups.pop()(); } catch (err) { console.error(err); }
      }
    },
  };
  return ctx;
}

async function route() {
  const hash = location.hash || "#/runs";
  const match = ROUTES.map((r) => ({ r, m: hash.match(r.pattern) })).find((x) => x.m);
  if (!match) {
    location.replace("#/runs");
    return;
  }
  if (current) current.close();
  const ctx = pageContext();
  current = ctx;
  setReady(false);
  for (const link of document.querySelectorAll("[data-nav]")) {
    link.classList.toggle("active", link.dataset.nav === match.r.nav);
  }
  fill(root, h("p", { class: "muted loading" }, "Loading…"));
  const params = match.m.slice(1).map((p) => (p === undefined ? undefined : decodeURIComponent(p)));
  try {
    await match.r.page(ctx, ...params);
  } catch (err) {
    if (!ctx.alive) return;
    console.error(err);
    fill(root, errorBox(err.message || String(err)), h("p", {}, h("a", { href: "#/runs" }, "← back to the runs")));
  }
  if (ctx.alive) setReady(true);
}

async function header() {
  const slot = document.getElementById("model-info");
  try {
    const info = await api.info();
    fill(slot, h("span", { class: "muted" }, "model "), h("code", { "data-testid": "model-name" }, info.model ?? "none"),
      h("span", { class: "muted version" }, ` · veriscale ${info.version}`));
    if (info.embedded) {
      fill(document.getElementById("banner-slot"), h("div", { class: "banner", "data-testid": "embedded-banner", role: "note" },
        h("strong", {}, "Embedded model. "),
        "Jobs run on the built-in SmolLM2-135M, a weak judge meant for trying veriscale. ",
        "Restart with ", h("code", {}, "veriscale serve --model …"),
        " pointing at a real model for verdicts you can trust."));
    }
  } catch (err) {
    fill(slot, h("span", { class: "muted" }, `server info unavailable: ${err.message}`));
  }
}

window.addEventListener("hashchange", route);
header();
route();
