"""What the dashboard shows, read from the store: JSON-ready dicts, one function a page.

    runs_page(store, text="select", offset=0, limit=50)   # {"total", "runs": [...]}, sorted, filtered
    run_view(store, 12)          # the run, its cost, children, and which page shows it ("view")
    selection_view(store, 12)    # candidates, preference matrix, per-order values, win mass, judgements
    progress_view(store, 13)     # curves (finished) or the points so far (running), with events
    call_view(store, key)        # one judgement call: the exact prompt, label distribution, mass, cost,
                                 # and the images it sent ("images": digest, label, /api/images/<digest>)
    image_bytes(store, digest)   # (mime, bytes) of a kept image, for GET /api/images/{sha256}

Every string in these dicts is data from a run; the dashboard renders it as text. Each view
first rewrites the runs whose process died without ending them as ``interrupted``
(:func:`veriscale.engine.run_liveness.settle_dead_runs`), so none shows ``running`` forever.
"""

from __future__ import annotations

import json
import re
from typing import Any

from veriscale.engine.run_liveness import settle_dead_runs
from veriscale.engine.run_log import RunLog
from veriscale.engine.run_summary import run_summary
from veriscale.engine.store import RunRecord, Store
from veriscale.errors import UserError
from veriscale.selection.core.position_bias import POSITION_BIAS_GAP, pair_orders


class NotFound(LookupError):
    """The store has no such run or call (the route answers 404 with this sentence)."""


VIEWS = {"select": "selection", "track": "progress", "track --follow": "progress", "harness run": "harness",
         "harness task": "harness", "score": "verdict", "compare": "verdict"}


def _view(run: RunRecord) -> str:
    """Which page shows the run: by command; a proxied request is its own page (its tournament, if
    one ran, inside it), and any other run whose result holds a ranking (a race) is a selection."""
    if run.command.startswith("proxy ") and run.command != "proxy conversation":
        return "proxy"
    if isinstance(run.result, dict) and "ranking" in run.result:
        return "selection"
    return VIEWS.get(run.command, "other")


def _record(run: RunRecord) -> dict[str, Any]:
    doc = {"id": run.id, "command": run.command, "model": run.model, "status": run.status,
           "created_at": run.created_at, "finished_at": run.finished_at, "summary": run_summary(run),
           "view": _view(run), "job": run.args.get("job") if isinstance(run.args, dict) else None}
    if run.damaged:
        doc["damaged"] = list(run.damaged)
    return doc


def _listed_cost(store: Store, run: RunRecord, prices: Any) -> dict[str, Any]:
    """The runs list's cost column: calls, cache hits, prompt tokens sent / processed (None: some server
    did not say), completion tokens and, with a price table, money (:mod:`veriscale.engine.run_cost`)."""
    cost = store.run_cost(run.id) if prices is None else run_cost_with_prices(store, run.id, prices)
    keep = ("calls", "cache_hits", "prompt_tokens", "prompt_tokens_processed", "completion_tokens", "money")
    return {k: cost[k] for k in keep if k in cost}


def run_cost_with_prices(store: Store, run_id: int, prices: Any) -> dict[str, Any]:
    from veriscale.engine.run_cost import totals

    ids = [run_id] + [c.id for c in store.child_runs(run_id)]
    return totals([call for rid in ids for call in store.run_calls(rid)], prices)


#: What a listed run's ``score`` is, by command (any other run: the confidence of its pick);
#: :data:`veriscale.engine.run_records.RUN_SCORE_SQL` reads it.
SCORE_LABELS = {"score": "reward", "compare": "P(A beats B)", "track": "progress", "track --follow": "progress"}


def runs_page(store: Store, *, command: str | None = None, status: str | None = None, text: str | None = None,
              sort: str = "id", order: str = "desc", score: tuple[float | None, float | None] = (None, None),
              cost: tuple[int | None, int | None] = (None, None), offset: int = 0, limit: int = 50,
              redactor: Any = None, prices: Any = None) -> dict[str, Any]:
    """A page of runs, each with its ``score`` (and what it is, ``score_label``) and its cost (money too
    with a ``prices`` table; ``tokens`` is what ``sort="cost"`` and the ``cost`` range count), sorted
    and filtered by the store (:meth:`~veriscale.engine.store.Store.query_runs_ranked`)::

        runs_page(store, command="select", sort="score", order="asc", score=(None, 0.9))  # least sure first

    With an enabled ``redactor`` a ``text`` search matches only what the page may show (the
    redacted text), so it cannot be used to guess a stored secret piece by piece."""
    query = dict(command=command, status=status, text=text, sort=sort, order=order, score=score, cost=cost)
    page = _runs_page(store, query, offset=offset, limit=limit, redactor=redactor)
    for listed, (run, value, tokens) in zip(page["runs"], page.pop("records")):
        listed["score"] = value
        listed["score_label"] = None if value is None else SCORE_LABELS.get(run.command, "confidence")
        listed["cost"] = {**_listed_cost(store, run, prices), "tokens": tokens}
    return page


def _runs_page(store: Store, query: dict[str, Any], *, offset: int, limit: int, redactor: Any) -> dict[str, Any]:
    settle_dead_runs(store)
    text = query["text"]
    if not text or redactor is None or not getattr(redactor, "enabled", False):
        total, rows = store.query_runs_ranked(**query, offset=offset, limit=limit)
    else:
        _, found = store.query_runs_ranked(**query, offset=0, limit=-1)
        needle = text.lower()
        kept = [row for row in found if str(row[0].id) == text or needle in json.dumps(
            redactor([row[0].command, row[0].model, row[0].args, row[0].result]), ensure_ascii=False, default=str).lower()]
        total, rows = len(kept), kept[offset:offset + limit]
    return {"total": total, "offset": offset, "limit": limit, "runs": [_record(row[0]) for row in rows], "records": rows}


def _run(store: Store, run_id: int) -> RunRecord:
    settle_dead_runs(store)  # the run and its children (a harness run's tasks)
    run = store.run(run_id)
    if run is None:
        raise NotFound(f"there is no run {run_id} in the store: pick one from the runs list")
    return run


def run_view(store: Store, run_id: int) -> dict[str, Any]:
    run = _run(store, run_id)
    return {**_record(run), "args": run.args, "result": run.result, "cost": store.run_cost(run.id),
            "children": [_record(c) for c in store.child_runs(run.id)],
            "trajectories": RunLog(store).trajectories(run.id)}


def selection_view(store: Store, run_id: int) -> dict[str, Any]:
    """The pick and the evidence: per-candidate rewards, mean P(i ≻ j) per pair, every judgement."""
    run = _run(store, run_id)
    result = run.result if isinstance(run.result, dict) else {}
    if "ranking" not in result:
        raise NotFound(f"run {run_id} is a '{run.command}' run without a selection: open it as a run instead")
    ranking = sorted(result["ranking"] + _failed_candidates(result), key=lambda r: r["index"])
    n = len(ranking)
    tournament = result.get("tournament") or {}
    judgements = list(tournament.get("comparisons") or [])
    sums = [[0.0] * n for _ in range(n)]
    counts = [[0] * n for _ in range(n)]
    for k, j in enumerate(judgements):
        j["n"] = k
        a, b, p = j["i"], j["j"], j["p"]
        sums[a][b] += p
        sums[b][a] += 1.0 - p
        counts[a][b] += 1
        counts[b][a] += 1
    matrix = [[sums[a][b] / counts[a][b] if counts[a][b] else None for b in range(n)] for a in range(n)]
    strengths = list(tournament.get("strengths") or [])
    orders = pair_orders(judgements)
    return {
        "run_id": run.id, "status": run.status, "method": result.get("method"), "task": result.get("task"),
        "best": result.get("index"), "confidence": result.get("confidence"), "decided": result.get("decided"),
        "reason": _reason_text(result.get("reason")), "stop_reason": result.get("stop_reason"),
        "candidates": [{**r, "strength": strengths[r["index"]] if r["index"] < len(strengths) else None}
                       for r in ranking],
        "criteria": list((ranking[0].get("criteria") or {}).keys()) if ranking else [],
        "matrix": matrix, "counts": counts, "judgements": judgements,
        "orders": _order_cells(orders, n), "position_bias": [[o["a"], o["b"]] for o in orders if o["position_bias"]],
        "position_bias_gap": POSITION_BIAS_GAP,
        "usage": result.get("usage"), "notes": result.get("notes") or [],
        "injection": result.get("injection"),
        "budget": result.get("budget"),
    }


def _failed_candidates(result: dict[str, Any]) -> list[dict[str, Any]]:
    """A proxied request's candidates that failed, as unranked entries: the ranking numbers each
    candidate by its place among the N asked for, so a failed one keeps its number (and its row)."""
    ranked = {r["index"] for r in result["ranking"]}
    return [{"rank": None, "index": c["index"], "id": f"candidate-{c['index']}", "score": None, "criteria": {},
             "failed": True, "error": c.get("error")}
            for c in result.get("candidates") or [] if isinstance(c, dict) and "reply" in c and c["reply"] is None
            and isinstance(c.get("index"), int) and c["index"] not in ranked]


def _order_cells(orders: list[dict[str, Any]], n: int) -> list[list[dict[str, Any] | None]]:
    """N×N: for row r and column c, mean P(r ≻ c) with r shown first ("first") and with c shown
    first ("second"), the judgement count of each, and the pair's position-bias mark."""
    cells: list[list[dict[str, Any] | None]] = [[None] * n for _ in range(n)]
    for o in orders:
        a, b, pa, pb = o["a"], o["b"], o["a_first"], o["b_first"]
        if not (0 <= a < n and 0 <= b < n):
            continue
        flip = (lambda v: None if v is None else 1.0 - v)
        cells[a][b] = {"first": pa, "second": pb, "n_first": o["n_a_first"], "n_second": o["n_b_first"],
                       "position_bias": o["position_bias"]}
        cells[b][a] = {"first": flip(pb), "second": flip(pa), "n_first": o["n_b_first"], "n_second": o["n_a_first"],
                       "position_bias": o["position_bias"]}
    return cells


def _reason_text(reason: Any) -> str | None:
    """A selection's reason (``{"text": ...}``), or a proxied request's (already a sentence)."""
    return reason.get("text") if isinstance(reason, dict) else reason


def call_view(store: Store, key: str) -> dict[str, Any]:
    """One model call as the judgement panel shows it."""
    call = store.call(key)
    if call is None:
        raise NotFound(f"there is no call {key[:16]!r}… in the store")  # repr: a key is the client's text
    request, response = call["request"] or {}, call["response"] or {}
    return {
        "key": call["key"], "kind": call["kind"], "model": call["model"], "status": call["status"],
        "error": call["error"], "messages": request.get("messages"), "prefill": request.get("prefill"),
        "labels": request.get("labels"), "label_probs": response.get("label_probs"),
        "label_mass": response.get("label_mass"), "unseen_mass": response.get("unseen_mass"),
        "strategy": response.get("strategy") or None, "prefilled": response.get("prefilled"),
        "samples": response.get("samples") or None,
        "reasoning": response.get("reasoning") or None, "top_tokens": response.get("top_tokens"),
        "text": response.get("text"), "tool_calls": response.get("tool_calls"),
        "cost": {"prompt_tokens": call["prompt_tokens"], "cached_tokens": call["cached_tokens"],
                 "completion_tokens": call["completion_tokens"], "latency_s": call["latency_s"]},
        "created_at": call["created_at"],
        "images": request_images(request, store.call_images(key)) if call["kind"] == "score" else [],
    }


#: an image's name in the store: the sha256 of its bytes, 64 hex digits
IMAGE_DIGEST = re.compile(r"[0-9a-fA-F]{64}")
#: the types an image is served as (what ``veriscale.data.images`` sends); anything else is bytes
IMAGE_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif")


def image_url(digest: str) -> str:
    return f"/api/images/{digest.lower()}"


def request_images(request: dict[str, Any], linked: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The images a stored score request sent, in order (its messages' ``parts`` name each by digest),
    each with the label its call gave it and whether its bytes are kept (``linked``: Store.call_images)."""
    found: list[dict[str, Any]] = []
    messages = request.get("messages") if isinstance(request, dict) else None
    for n, message in enumerate(messages if isinstance(messages, list) else []):
        parts = message.get("parts") if isinstance(message, dict) else None
        for part in parts if isinstance(parts, list) else []:
            digest = part.get("sha256") if isinstance(part, dict) else None
            if not isinstance(digest, str) or not IMAGE_DIGEST.fullmatch(digest):
                continue
            known = linked.get(digest.lower(), {})
            found.append({"sha256": digest.lower(), "mime": part.get("mime"), "message": n,
                          "label": known.get("label") or "", "width": known.get("width"),
                          "height": known.get("height"), "kept": bool(known.get("kept")), "url": image_url(digest)})
    return found


def image_bytes(store: Store, digest: str) -> tuple[str, bytes]:
    """A kept image's type (one of :data:`IMAGE_TYPES`, else ``application/octet-stream``) and bytes."""
    if not IMAGE_DIGEST.fullmatch(digest):
        raise UserError(f"{digest[:80]!r} is not an image digest: give the 64 hex digits of the sha256 of its bytes, "
                        "as a call's request names it")
    kept = store.image(digest)
    if kept is None:
        raise NotFound(f"there is no image {digest.lower()[:16]}… in the store: it was never sent by a recorded call, "
                       "or was pruned with the calls that sent it")
    mime, data = kept
    return (mime if mime in IMAGE_TYPES else "application/octet-stream"), data


def progress_view(store: Store, run_id: int) -> dict[str, Any]:
    """Curves of a finished track run, or the points streamed so far by a running one.

    ``last_event`` is the id an event stream continues from (``/api/runs/{id}/stream?after=``).
    """
    run = _run(store, run_id)
    log = RunLog(store)
    result = run.result if isinstance(run.result, dict) else {}
    newest, calls = log.last(run.id), log.last(run.id, "calls")
    after = newest.id if newest else 0
    if run.status != "running" and result.get("curves") is not None:
        curves = result["curves"]  # finished: the curves it recorded (no need to replay its events)
    else:
        events, after = [], 0
        while batch := log.since(run.id, after, 5000):
            events += batch
            after = batch[-1].id
        curves = curves_from_events(events)
    return {"run_id": run.id, "status": run.status, "command": run.command, "curves": curves,
            "voc_by_outcome": result.get("voc_by_outcome"), "last_event": after,
            "calls": calls.data if calls else None}


def curves_from_events(events: list[Any]) -> list[dict[str, Any]]:
    """Curves rebuilt from ``point`` and ``event`` run events (``data["trajectory"]`` groups them)."""
    curves: dict[str, dict[str, Any]] = {}
    for e in events:
        if e.kind not in ("point", "event"):
            continue
        name = str(e.data.get("trajectory") or "")
        curve = curves.setdefault(name, {"trajectory": name, "points": [], "events": [], "voc": None, "n_steps": 0})
        if e.kind == "point":
            curve["points"].append(e.data["point"])
            curve["n_steps"] = max(curve["n_steps"], e.data["point"]["step"])
            curve["voc"] = e.data.get("voc", curve["voc"])
        else:
            curve["events"].append(e.data["event"])
    return list(curves.values())
