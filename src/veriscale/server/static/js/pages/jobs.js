// pages/jobs.js — #/jobs: the jobs table (refreshed every 2 s while any job is queued or
// running), cancel buttons, links to each job's run, and forms to submit select and track jobs.

import { api } from "../api.js";
import { errorBox, fill, fmtDuration, fmtTime, h, statusChip } from "../dom.js";

const REFRESH_MS = 2000;
const METHODS = ["ppt", "round_robin", "knockout", "pointwise"];

export async function jobsPage(ctx) {
  const body = h("tbody", {});
  const message = h("div", {});
  const info = await api.info().catch(() => ({ allow_dirs: [] }));
  if (!ctx.alive) return;
  let timer = null;
  ctx.onCleanup(() => clearTimeout(timer));

  async function refresh() {
    clearTimeout(timer);
    let jobs;
    try {
      jobs = (await api.jobs()).jobs || [];
    } catch (err) {
      if (ctx.alive) fill(message, errorBox(err.message));
      timer = setTimeout(refresh, REFRESH_MS * 2);
      return;
    }
    if (!ctx.alive) return;
    fill(body, ...(jobs.length ? jobs.map((job) => jobRow(job, cancel)) :
      [h("tr", {}, h("td", { colspan: 7, class: "empty" }, "No jobs yet: submit one below."))]));
    if (jobs.some((j) => j.status === "queued" || j.status === "running")) timer = setTimeout(refresh, REFRESH_MS);
  }

  async function cancel(job) {
    try {
      await api.cancelJob(job.id);
      fill(message);
    } catch (err) {
      fill(message, errorBox(err.message));
    }
    refresh();
  }

  async function submit(kind, params, feedback) {
    fill(feedback, h("span", { class: "muted" }, "submitting…"));
    try {
      const job = await api.submitJob(kind, params);
      fill(feedback, h("span", { class: "good" }, `job #${job.id} queued`));
      refresh();
    } catch (err) {
      fill(feedback, errorBox(err.message));
    }
  }

  const dirs = info.allow_dirs || [];
  fill(ctx.root, h("section", { class: "page", "data-testid": "jobs-page" },
    h("div", { class: "page-head" }, h("h1", {}, "Jobs"),
      h("span", { class: "muted small" }, dirs.length ? `paths must lie under ${dirs.join(", ")}` : "this server was started without --allow-dir: jobs cannot read files")),
    message,
    h("div", { class: "table-wrap card flush" }, h("table", { class: "table jobs", "data-testid": "jobs-table" },
      h("thead", {}, h("tr", {}, ["#", "kind", "status", "params", "submitted", "took", ""].map((c) => h("th", {}, c)))), body)),
    h("div", { class: "grid-2" }, selectForm(submit, dirs), trackForm(submit, dirs))));
  await refresh();
}

function jobRow(job, cancel) {
  const unfinished = job.status === "queued" || job.status === "running";
  return h("tr", { "data-testid": "job-row", "data-job-id": job.id, "data-status": job.status },
    h("td", { class: "num" }, String(job.id)),
    h("td", {}, h("code", {}, job.kind)),
    h("td", {}, statusChip(job.status), job.error ? h("div", { class: "bad small" }, job.error) : null),
    h("td", { class: "params" }, paramsText(job.params)),
    h("td", { class: "muted nowrap" }, fmtTime(job.created_at)),
    h("td", { class: "muted nowrap" }, job.started_at ? (job.finished_at ? fmtDuration(job.started_at, job.finished_at) : "running…") : "—"),
    h("td", { class: "actions nowrap" },
      job.run_id !== null && job.run_id !== undefined ? h("a", { class: "button small", href: `#/runs/${job.run_id}`, "data-testid": "job-run-link" }, `run #${job.run_id}`) : null,
      unfinished ? h("button", { class: "small danger", "data-testid": "job-cancel", onclick: () => cancel(job) }, "Cancel") : null));
}

function paramsText(params) {
  if (!params || typeof params !== "object") return "";
  return Object.entries(params).map(([k, v]) => `${k}=${Array.isArray(v) ? v.join(", ") : typeof v === "object" ? JSON.stringify(v) : v}`).join("  ");
}

const lines = (text) => text.split("\n").map((l) => l.trim()).filter(Boolean);

function selectForm(submit, dirs) {
  const paths = h("textarea", { rows: 3, placeholder: `${dirs[0] ?? "/data"}/pool.jsonl\n(one path a line: files, folders or a JSONL pool)`, "data-testid": "select-paths" });
  const method = h("select", { "data-testid": "select-method" }, METHODS.map((m) => h("option", { value: m }, m)));
  const k = h("input", { type: "number", min: 1, max: 64, value: 2, "data-testid": "select-k" });
  const feedback = h("div", { class: "feedback" });
  const form = h("form", { class: "card form", "data-testid": "select-form" },
    h("h2", {}, "Select the best candidate"),
    h("label", {}, "Candidate paths", paths),
    h("div", { class: "row" }, h("label", {}, "Method", method), h("label", {}, "k (PPT pivots)", k)),
    h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, "Submit select job"), feedback));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const list = lines(paths.value);
    if (!list.length) {
      fill(feedback, errorBox("give at least one path"));
      return;
    }
    submit("select", { paths: list, method: method.value, k: Number(k.value) || 2 }, feedback);
  });
  return form;
}

function trackForm(submit, dirs) {
  const paths = h("textarea", { rows: 3, placeholder: `${dirs[0] ?? "/data"}/runs.jsonl\n(trajectory files, one a line)`, "data-testid": "track-paths" });
  const every = h("input", { type: "number", min: 1, placeholder: "auto", "data-testid": "track-every" });
  const feedback = h("div", { class: "feedback" });
  const form = h("form", { class: "card form", "data-testid": "track-form" },
    h("h2", {}, "Track progress"),
    h("label", {}, "Trajectory paths", paths),
    h("div", { class: "row" }, h("label", {}, "Score every n steps", every)),
    h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, "Submit track job"), feedback));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const list = lines(paths.value);
    if (!list.length) {
      fill(feedback, errorBox("give at least one path"));
      return;
    }
    const params = { paths: list };
    if (every.value) params.every = Number(every.value);
    submit("track", params, feedback);
  });
  return form;
}
