// pages/harness.js — a harness run: per task its outcome, base and problems; the claim map as
// consensus / disputed / omitted columns; both ledgers; the adjudication with the evidence each
// revision cites; and every delivered file's diff against the base rollout (text, coloured by class).

import { api } from "../api.js";
import { fill, fmtNum, h, pretty, statusChip } from "../dom.js";

const GROUPS = [
  ["consensus", "Consensus", "every rollout agrees"],
  ["disputed", "Disputed", "rollouts give different values"],
  ["omitted", "Omitted", "some rollouts leave it out"],
];

export async function harnessSection(ctx, run, body) {
  const view = await api.harness(run.id);
  if (!ctx.alive) return;
  const tasks = view.tasks || [];
  fill(body, h("div", { class: "harness", "data-testid": "harness-page" },
    tasks.length ? tasks.map(taskCard) : h("p", { class: "muted" }, "This harness run recorded no task.")));
}

function taskCard(task) {
  const problems = task.problems || [];
  const cost = task.cost || {};
  return h("article", { class: "card task", "data-testid": "harness-task" },
    h("div", { class: "task-head" },
      h("h2", {}, task.task ?? "task"),
      statusChip(task.outcome, { "data-testid": "task-outcome" }),
      h("span", { class: "muted" }, "base "), h("code", {}, task.base ?? "—"),
      task.run_id ? h("a", { class: "small", href: `#/runs/${task.run_id}` }, `task run #${task.run_id}`) : null,
      h("span", { class: "grow" }),
      h("span", { class: "muted small" }, `${fmtNum(cost.calls ?? 0)} calls · ${fmtNum(cost.prompt_tokens ?? 0)} prompt tokens`)),
    task.error ? h("div", { class: "error-box" }, typeof task.error === "string" ? task.error : pretty(task.error)) : null,
    !task.readable && task.unreadable_reason ? h("div", { class: "warn-box" }, task.unreadable_reason) : null,
    problems.length ? h("div", { class: "warn-box" }, h("strong", {}, "Problems"),
      h("ul", {}, problems.map((p) => h("li", {}, String(p))))) : null,
    phases(task.phases),
    claimMap(task.claims || {}),
    h("div", { class: "grid-2" },
      ledger("Resolver ledger", task.ledgers?.resolver),
      ledger("Challenger ledger", task.ledgers?.challenger)),
    adjudication(task.adjudication || {}),
    diffs(task.diffs || []));
}

function phases(list) {
  const entries = Object.entries(list || {});
  if (!entries.length) return null;
  return h("div", { class: "phases" }, h("span", { class: "muted" }, "Phases: "),
    entries.map(([name, p]) => h("span", { class: "phase", title: pretty(p) }, name, " ",
      statusChip(p && typeof p === "object" ? p.status : String(p)))));
}

function claimMap(claims) {
  return h("section", { class: "section" }, h("h3", {}, "Claim map"),
    h("div", { class: "claim-map", "data-testid": "claim-map" }, GROUPS.map(([key, title, hint]) => {
      const list = claims[key] || [];
      return h("div", { class: `claim-col col-${key}` },
        h("div", { class: "claim-col-head" }, h("strong", {}, title), h("span", { class: "count" }, String(list.length)),
          h("span", { class: "muted small" }, hint)),
        list.length ? list.map((c) => claim(c, key)) : h("p", { class: "muted small" }, "none"));
    })));
}

function claim(c, group) {
  const candidates = Array.isArray(c.candidates) ? c.candidates : [];
  return h("div", { class: "claim", "data-testid": "claim", "data-status": group, title: c.id ?? "" },
    h("div", { class: "claim-text" }, c.text ?? c.id ?? ""),
    group === "disputed" && candidates.length > 1
      ? h("ul", { class: "claim-values" }, candidates.map((v) => h("li", {}, h("code", {}, String(v.display ?? "")), " ",
        (v.rollouts || []).map((r) => h("span", { class: "chip rollout" }, r)))))
      : h("div", { class: "chips" }, (c.rollouts || []).map((r) => h("span", { class: "chip rollout" }, r))),
    Array.isArray(c.missing_from) && c.missing_from.length
      ? h("div", { class: "chips" }, h("span", { class: "muted small" }, "missing from "),
        c.missing_from.map((r) => h("span", { class: "chip rollout missing" }, r))) : null);
}

// -- ledgers ---------------------------------------------------------------------------------

function ledger(title, doc) {
  let content;
  if (doc === null || doc === undefined) content = h("p", { class: "muted" }, "not recorded (or not readable)");
  else if (doc && Array.isArray(doc.entries)) {
    const rest = Object.fromEntries(Object.entries(doc).filter(([k]) => k !== "entries"));
    content = [doc.entries.length ? doc.entries.map(entry) : h("p", { class: "muted" }, "no entries"),
      Object.keys(rest).length ? h("pre", { class: "json" }, pretty(rest)) : null];
  } else content = h("pre", { class: "json" }, pretty(doc));
  return h("div", { class: "ledger", "data-testid": "ledger" }, h("h3", {}, title), content);
}

function entry(e) {
  if (!e || typeof e !== "object" || Array.isArray(e)) return h("pre", { class: "json" }, pretty(e));
  const { id, claim: claimText, ...rest } = e;
  return h("div", { class: "entry" },
    h("div", { class: "entry-head" }, id !== undefined ? h("span", { class: "chip" }, String(id)) : null,
      claimText !== undefined ? h("span", { class: "entry-claim" }, typeof claimText === "string" ? claimText : pretty(claimText)) : null),
    h("dl", { class: "kv" }, Object.entries(rest).map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, value(v))))));
}

function value(v) {
  if (v === null || v === undefined) return h("span", { class: "muted" }, "—");
  if (typeof v === "boolean") return h("span", { class: v ? "good" : "bad" }, v ? "yes" : "no");
  if (typeof v === "string" || typeof v === "number") return String(v);
  if (Array.isArray(v) && v.every((x) => typeof x === "string" || typeof x === "number")) {
    return v.length ? h("ul", { class: "plain-list" }, v.map((x) => h("li", {}, String(x)))) : h("span", { class: "muted" }, "none");
  }
  return h("pre", { class: "json" }, pretty(v));
}

// -- adjudication ----------------------------------------------------------------------------

function adjudication(adj) {
  const revisions = adj.revisions || [];
  const unresolved = Array.isArray(adj.unresolved) ? adj.unresolved : [];
  const changes = adj.changes || [];
  return h("section", { class: "section adjudication", "data-testid": "adjudication" }, h("h3", {}, "Adjudication"),
    h("dl", { class: "kv" },
      h("div", {}, h("dt", {}, "base"), h("dd", {}, h("code", {}, adj.base ?? "—"))),
      h("div", {}, h("dt", {}, "reason"), h("dd", {}, adj.reason ?? "—")),
      unresolved.length ? h("div", {}, h("dt", {}, "unresolved"), h("dd", {}, value(unresolved))) : null),
    revisions.length ? h("div", { class: "revisions" }, h("h4", {}, `Revisions (${revisions.length})`),
      revisions.map((rev) => h("div", { class: "revision", "data-testid": "revision" },
        h("div", {}, h("code", {}, String(rev.file ?? "?")), " — ", typeof rev.change === "string" ? rev.change : pretty(rev.change)),
        (rev.evidence_entries || []).length ? h("div", { class: "evidence-list" }, rev.evidence_entries.map((ev) =>
          h("div", { class: "evidence-item" }, h("span", { class: "chip" }, String(ev.ref)),
            ev.entry ? entry(ev.entry) : h("span", { class: "bad small" }, " cited entry not found in the ledgers"))))
          : h("p", { class: "muted small" }, "no evidence cited")))) : h("p", { class: "muted" }, "no revisions"),
    changes.length ? h("div", {}, h("h4", {}, "Delivered changes"), h("ul", {}, changes.map((c) =>
      h("li", {}, h("code", {}, String(c.file ?? "?")), " — ", String(c.summary ?? ""),
        Array.isArray(c.evidence) ? c.evidence.map((r) => h("span", { class: "chip" }, String(r))) : null)))) : null,
    adj.finish || adj.repair || adj.delivery ? h("details", {}, h("summary", {}, "Raw records (finish, repair, delivery)"),
      h("pre", { class: "json" }, pretty({ finish: adj.finish, repair: adj.repair, delivery: adj.delivery }))) : null);
}

// -- diffs -------------------------------------------------------------------------------------

function diffs(list) {
  return h("section", { class: "section" }, h("h3", {}, `Delivered files (${list.length})`),
    list.length ? list.map(diffBlock) : h("p", { class: "muted" }, "no delivered file to compare"));
}

function diffBlock(d) {
  let content;
  if (d.status === "binary") content = h("p", { class: "muted small" }, d.changed ? "binary file, changed" : "binary file, unchanged");
  else if (d.status === "skipped") content = h("p", { class: "warn-box" }, d.note ?? "skipped");
  else if (!d.diff) content = h("p", { class: "muted small" }, "no textual change");
  else content = h("pre", { class: "diff", "data-testid": "diff", "data-path": d.path }, String(d.diff).split("\n").map(diffLine));
  return h("div", { class: "diff-file" },
    h("div", { class: "diff-head" }, h("code", {}, d.path ?? "?"), statusChip(d.status)), content);
}

function diffLine(line) {
  let cls = "ctx";
  if (line.startsWith("+++") || line.startsWith("---")) cls = "meta";
  else if (line.startsWith("@@")) cls = "hunk";
  else if (line.startsWith("+")) cls = "add";
  else if (line.startsWith("-")) cls = "del";
  return h("span", { class: `dl ${cls}` }, line + "\n");
}
