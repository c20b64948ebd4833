// tool_blocks.js — tool calls and their results as blocks of their own (as Inspect AI's viewer
// shows them): the call's name and arguments, and the result tied to the call it answers.
//   toolCallBlock({id, function: {name, arguments}}, resultText)
//   messageBlocks(messages)   // chat messages; a "tool" message goes inside the call it answers

import { h, pretty } from "./dom.js";

/** A tool call's arguments as readable text: parsed JSON pretty-printed, else the text as it came. */
export function argumentsText(args) {
  if (args === null || args === undefined || args === "") return "";
  if (typeof args !== "string") return pretty(args);
  try {
    return pretty(JSON.parse(args));
  } catch {
    return args;
  }
}

/** One call (chat shape, or {name, arguments}); `result`: the text that came back, if known. */
export function toolCallBlock(call, result, { exitCode } = {}) {
  const fn = (call && call.function) || call || {};
  const name = String(fn.name ?? "?");
  const failed = exitCode !== null && exitCode !== undefined && exitCode !== 0;
  return h("div", { class: "tool-call", "data-testid": "tool-call", "data-name": name },
    h("div", { class: "tool-call-head" }, h("span", { class: "chip tool" }, "tool call"),
      h("strong", { class: "mono", "data-testid": "tool-name" }, name),
      call && call.id ? h("span", { class: "muted small mono" }, String(call.id)) : null),
    h("pre", { class: "tool-args", "data-testid": "tool-args" }, argumentsText(fn.arguments)),
    result === null || result === undefined ? null
      : h("div", { class: ["tool-result", failed ? "failed" : null], "data-testid": "tool-result" },
        h("div", { class: "tool-call-head" }, h("span", { class: "chip" }, "result"),
          failed ? h("span", { class: "chip st-failed" }, `exit ${exitCode}`) : null),
        h("pre", { class: "tool-output" }, String(result))));
}

/** Chat messages as blocks; each tool result is shown inside the block of the call it answers. */
export function messageBlocks(messages) {
  const list = Array.isArray(messages) ? messages : [];
  const results = new Map();
  for (const m of list) {
    if (m && m.role === "tool" && m.tool_call_id) results.set(String(m.tool_call_id), m.content ?? "");
  }
  const called = new Set(list.flatMap((m) => (m && Array.isArray(m.tool_calls) ? m.tool_calls.map((c) => String(c.id)) : [])));
  const out = [];
  for (const m of list) {
    if (!m) continue;
    if (m.role === "tool" && m.tool_call_id && called.has(String(m.tool_call_id))) continue; // shown with its call
    const calls = Array.isArray(m.tool_calls) ? m.tool_calls : [];
    out.push(h("div", { class: ["message", `role-${String(m.role).replace(/[^a-z]/g, "")}`], "data-testid": "message", "data-role": String(m.role) },
      h("div", { class: "role" }, String(m.role), m.role === "tool" && m.tool_call_id ? h("span", { class: "muted small mono" }, ` ${m.tool_call_id}`) : null),
      m.content ? h("pre", { class: "prompt wrap" }, String(m.content)) : null,
      calls.map((c) => toolCallBlock(c, results.get(String(c.id))))));
  }
  return out;
}
