// api.js — same-origin calls to the veriscale server. Errors carry the server's one sentence.

export class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

function url(path, params) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== null && value !== undefined && value !== "") query.set(key, String(value));
  }
  const qs = query.toString();
  return qs ? `${path}?${qs}` : path;
}

async function answer(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (!response.ok) {
    const sentence = body && typeof body.error === "string" ? body.error
      : `the server answered ${response.status} ${response.statusText}`;
    throw new ApiError(sentence, response.status);
  }
  return body;
}

async function send(target, init) {
  let response;
  try {
    response = await fetch(target, { credentials: "same-origin", ...init });
  } catch {
    throw new ApiError("the server did not answer: is `veriscale serve` still running?", 0);
  }
  return answer(response);
}

export function getJSON(path, params) {
  return send(url(path, params), { headers: { accept: "application/json" } });
}

export function postJSON(path, body) {
  return send(path, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify(body ?? {}),
  });
}

export const api = {
  info: () => getJSON("/api/info"),
  runs: (params) => getJSON("/api/runs", params),
  run: (id) => getJSON(`/api/runs/${id}`),
  selection: (id) => getJSON(`/api/runs/${id}/selection`),
  progress: (id) => getJSON(`/api/runs/${id}/progress`),
  harness: (id) => getJSON(`/api/runs/${id}/harness`),
  steps: (id, trajectory, offset, limit) => getJSON(`/api/runs/${id}/steps`, { trajectory, offset, limit }),
  findSteps: (id, trajectory, params) => getJSON(`/api/runs/${id}/steps/find`, { trajectory, ...params }),
  call: (key) => getJSON(`/api/calls/${encodeURIComponent(key)}`),
  jobs: () => getJSON("/api/jobs"),
  submitJob: (kind, params) => postJSON("/api/jobs", { kind, params }),
  cancelJob: (id) => postJSON(`/api/jobs/${id}/cancel`, {}),
  streamUrl: (id, after) => url(`/api/runs/${id}/stream`, { after }),
};

/** The route of a run's trajectory viewer (at checkpoint `step`, 1-based as the curve counts, if given). */
export function trajectoryHref(runId, name, step) {
  const at = step === undefined || step === null ? "" : `?step=${Number(step)}`;
  return `#/runs/${runId}/trajectory/${encodeURIComponent(name)}${at}`;
}
