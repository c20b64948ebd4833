// pages/proxy.js — one proxied request (a "proxy <api>" run): the conversation the agent sent,
// each candidate's text and tool calls side by side with which one was sent and why, and the
// tournament behind the pick (the selection section) when one ran.

import { errorBox, fill, fmtNum, h } from "../dom.js";
import { messageBlocks, toolCallBlock } from "../tool_blocks.js";
import { selectionSection } from "./selection.js";

export async function proxySection(ctx, run, body) {
  const r = run.result && typeof run.result === "object" && !Array.isArray(run.result) ? run.result : {};
  const candidates = Array.isArray(r.candidates) ? r.candidates : [];
  const sent = r.how && candidates.length ? r.winner : null;
  const tournament = h("div", { class: "proxy-tournament", "data-testid": "tournament" });
  const conv = r.conversation && typeof r.conversation === "object" ? r.conversation : null;
  fill(body, h("div", { class: "proxy", "data-testid": "proxy-page" },
    h("div", { class: "card" },
      h("h2", {}, "The pick"),
      h("div", { class: "kpis" },
        kpi(r.how ?? run.status, "how", "proxy-how"),
        kpi(sent === null || sent === undefined ? "none" : `candidate-${sent}`, "sent to the client", "proxy-sent"),
        kpi(fmtNum(candidates.length), "candidates"),
        kpi(typeof r.latency_s === "number" ? `${r.latency_s.toFixed(2)} s` : "—", "latency"),
        kpi(typeof r.verify_s === "number" ? `${r.verify_s.toFixed(2)} s` : "—", "added by the pick")),
      r.reason ? h("p", { class: "reason", "data-testid": "proxy-reason" }, String(r.reason)) : null),
    h("div", { class: "card" }, h("h2", {}, "Conversation"),
      conv ? [
        conv.left_out ? h("p", { class: "muted small" }, `${fmtNum(conv.left_out)} earlier message(s) not kept`) : null,
        (conv.tools || []).length ? h("p", { class: "muted small" }, "tools: ", (conv.tools || []).map((t) => h("code", { class: "chip" }, String(t)))) : null,
        h("div", { class: "conversation", "data-testid": "conversation" }, messageBlocks(conv.messages)),
      ] : h("p", { class: "muted" }, "This run did not keep the conversation (it was recorded before veriscale kept it).")),
    h("div", { class: "card" }, h("h2", {}, "Candidates"),
      h("div", { class: "candidate-grid", "data-testid": "candidate-grid" }, candidates.map((c) => candidateCard(c, sent)))),
    h("div", { class: "card" }, h("h2", {}, "Tournament"), tournament)));
  if (Array.isArray(r.ranking)) {
    try {
      await selectionSection(ctx, run, tournament);
    } catch (err) {
      if (ctx.alive) fill(tournament, errorBox(err.message));
    }
  } else {
    fill(tournament, h("p", { class: "muted", "data-testid": "no-tournament" },
      "No tournament ran for this request", r.reason ? `: ${r.reason}` : "."));
  }
}

function kpi(value, label, testid) {
  return h("div", { class: "kpi" }, h("div", { class: "kpi-value", "data-testid": testid ?? null }, String(value)),
    h("div", { class: "kpi-label" }, label));
}

function candidateCard(c, sent) {
  const reply = c && c.reply && typeof c.reply === "object" ? c.reply : null;
  const isSent = sent !== null && sent !== undefined && c.index === sent;
  return h("div", { class: ["candidate-card", isSent ? "sent" : null], "data-testid": "candidate-card", "data-index": c.index,
    "data-sent": isSent ? "1" : "0" },
  h("div", { class: "candidate-head" }, h("strong", { class: "mono" }, `candidate-${c.index}`),
    isSent ? h("span", { class: "chip st-ok", "data-testid": "sent-chip" }, "sent") : null,
    c.error ? h("span", { class: "chip st-failed" }, "failed") : null),
  h("div", { class: "muted small" }, [String(c.model ?? ""),
    typeof c.latency_s === "number" ? ` · ${c.latency_s.toFixed(2)} s` : "",
    reply ? ` · ${fmtNum(reply.completion_tokens ?? 0)} tokens · ${reply.finish_reason ?? ""}` : ""].join("")),
  c.error ? errorBox(c.error) : null,
  reply && reply.text ? h("pre", { class: "prompt wrap", "data-testid": "candidate-text" }, String(reply.text)) : null,
  reply ? (reply.tool_calls || []).map((call) => toolCallBlock(call)) : null,
  reply && !reply.text && !(reply.tool_calls || []).length ? h("p", { class: "muted" }, "(empty reply)") : null);
}
