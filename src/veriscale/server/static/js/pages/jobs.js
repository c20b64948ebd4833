// pages/jobs.js — #/jobs: the jobs table (refreshed every 2 s while any job is queued or
// running), cancel buttons, every attempt's run of each job (a job resumed after a restart has
// the interrupted run and the new one), and forms to submit score, compare, select and track jobs.

import { api } from "../api.js";
import { errorBox, fill, fmtDuration, fmtTime, h, statusChip } from "../dom.js";

const REFRESH_MS = 2000;
const METHODS = ["ppt", "round_robin", "knockout", "pointwise"];
const CRITERIA = ["general", "agent"];

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
      [h("tr", {}, h("td", { colspan: 8, class: "empty" }, "No jobs yet: submit one below."))]));
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
      h("thead", {}, h("tr", {}, ["#", "kind", "status", "params", "submitted", "took", "attempts and runs", ""].map((c) => h("th", {}, c)))), body)),
    h("div", { class: "grid-2" }, scoreForm(submit), compareForm(submit)),
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
    h("td", { "data-testid": "job-attempts" }, attemptsList(job)),
    h("td", { class: "actions nowrap" },
      job.run_id !== null && job.run_id !== undefined ? h("a", { class: "button small", href: `#/runs/${job.run_id}`, "data-testid": "job-run-link" }, `run #${job.run_id}`) : null,
      unfinished ? h("button", { class: "small danger", "data-testid": "job-cancel", onclick: () => cancel(job) }, "Cancel") : null));
}

/** "2 attempts" and each run they opened, oldest first, with its status (the last is the job's run). */
function attemptsList(job) {
  const runs = job.runs || [];
  const attempts = job.attempts ?? 0;
  const head = h("span", { class: "muted small" }, `${attempts} attempt${attempts === 1 ? "" : "s"}` +
    (runs.length < attempts ? ` (${attempts - runs.length} stopped before opening a run)` : ""));
  if (!runs.length) return head;
  return [head, h("ol", { class: "attempts" }, runs.map((run) => h("li", { "data-testid": "job-attempt-run", "data-run-id": run.id },
    h("a", { href: `#/runs/${run.id}` }, `run #${run.id}`), " ", statusChip(run.status),
    h("span", { class: "muted small" }, ` ${fmtTime(run.created_at)}`))))];
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

function criteriaSelect(testid) {
  return h("select", { "data-testid": testid }, CRITERIA.map((c) => h("option", { value: c }, c)));
}

function scoreForm(submit) {
  const task = h("textarea", { rows: 2, placeholder: "The task, e.g. Print the number of lines in notes.txt.", "data-testid": "score-task" });
  const candidate = h("textarea", { rows: 3, placeholder: "The response to score, e.g. wc -l < notes.txt", "data-testid": "score-candidate" });
  const criteria = criteriaSelect("score-criteria");
  const feedback = h("div", { class: "feedback" });
  const form = h("form", { class: "card form", "data-testid": "score-form" },
    h("h2", {}, "Score one response"),
    h("label", {}, "Task", task), h("label", {}, "Response", candidate),
    h("div", { class: "row" }, h("label", {}, "Criteria", criteria)),
    h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, "Submit score job"), feedback));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    if (!task.value.trim() || !candidate.value.trim()) {
      fill(feedback, errorBox("give the task and the response"));
      return;
    }
    submit("score", { task: task.value, candidate: candidate.value, criteria: criteria.value }, feedback);
  });
  return form;
}

function compareForm(submit) {
  const task = h("textarea", { rows: 2, placeholder: "The task both responses answer", "data-testid": "compare-task" });
  const a = h("textarea", { rows: 3, placeholder: "Response A", "data-testid": "compare-a" });
  const b = h("textarea", { rows: 3, placeholder: "Response B", "data-testid": "compare-b" });
  const criteria = criteriaSelect("compare-criteria");
  const feedback = h("div", { class: "feedback" });
  const form = h("form", { class: "card form", "data-testid": "compare-form" },
    h("h2", {}, "Compare two responses"),
    h("label", {}, "Task", task), h("div", { class: "row" }, h("label", {}, "A", a), h("label", {}, "B", b)),
    h("div", { class: "row" }, h("label", {}, "Criteria", criteria)),
    h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, "Submit compare job"), feedback));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    if (!task.value.trim() || !a.value.trim() || !b.value.trim()) {
      fill(feedback, errorBox("give the task and both responses"));
      return;
    }
    submit("compare", { task: task.value, a: a.value, b: b.value, criteria: criteria.value }, feedback);
  });
  return form;
}
