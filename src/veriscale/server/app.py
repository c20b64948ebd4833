"""The FastAPI app behind ``veriscale serve``: REST jobs, runs and calls from the store, live
events, and the dashboard (every asset in the package, no CDN).

    app = create_app(store, runner, AccessPolicy.for_bind("127.0.0.1", 8765, token=None), roots=(Path("/data"),))
    uvicorn.run(app, host="127.0.0.1", port=8765)

Routes (the schema is at ``/openapi.json``; docs/SERVER.md has examples):

    GET  /api/runs?command=&status=&q=&sort=id|score|cost&order=desc|asc&min_score=&max_score=&min_cost=&max_cost=
         &offset=&limit=                                  GET /api/runs/{id}
    GET  /api/runs/{id}/selection | /progress | /harness  GET /api/runs/{id}/stream   (SSE)
    GET  /api/runs/{id}/steps?trajectory=&offset=&limit=  GET /api/runs/{id}/steps/find?trajectory=&q=&errors=
    GET  /api/runs/{id}/calls   GET /api/calls/{key}      GET /api/info      GET /api/health (no token needed)
    GET  /api/images/{sha256}   (the bytes of an image a recorded call sent, by the digest its request names)
    POST /api/jobs {"kind", "params"}   GET /api/jobs   GET /api/jobs/{id}   GET /api/jobs/{id}/result
    POST /api/jobs/{id}/cancel
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Query, Request
from fastapi import Path as FastPath
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from veriscale import __version__
from veriscale.settings.words import cli_text
from veriscale.engine.ids import MAX_ID
from veriscale.engine.run_log import RunLog
from veriscale.engine.store import Store
from veriscale.models.http_transport import close_loop_clients
from veriscale.data.reader import shown
from veriscale.errors import UserError, one_line
from veriscale.redact import Redactor
from veriscale.server import dashboard_data as views
from veriscale.server.job_kinds import PARAMS, JobRequest
from veriscale.server.jobs import InvalidParams, JobRunner
from veriscale.server.security import TOKEN_COOKIE, AccessPolicy, Guard, error_document
from veriscale.server.stream import run_stream

STATIC_DIR = Path(str(files("veriscale.server") / "static"))
MAX_PAGE = 1000
MAX_ROW = 2 ** 63 - 1  # SQLite's largest integer: a larger id or offset is refused (422), not an overflow
RowId = Annotated[int, FastPath(ge=1, le=MAX_ROW)]  # ids start at 1 (engine/ids.py)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _validation_sentence(exc: RequestValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return "the request is not valid: see /openapi.json for its shape"
    first = errors[0]
    kind = str(first.get("type", ""))
    if kind == "json_invalid":  # the body is not JSON at all
        return ("the request body is not valid JSON: send a JSON object such as "
                '{"kind": "score", "params": {"task": "...", "candidate": "..."}} (see /openapi.json)')
    loc = [str(p) for p in first.get("loc", ()) if p != "body"]
    if kind == "missing" and not loc:
        return 'the request has no body: send a JSON object {"kind": ..., "params": {...}} (see /openapi.json)'
    if kind in ("model_attributes_type", "dict_type") and not loc:
        return 'the request body is JSON but not an object: send {"kind": ..., "params": {...}} (see /openapi.json)'
    job = f"a {loc.pop(0)} job's " if loc and loc[0] in PARAMS else ""  # the kind that selected the schema
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    where = shown(".".join(loc), 80) or "body"
    if kind == "union_tag_invalid":
        given = first.get("input")
        tag = shown(str(given.get("kind") if isinstance(given, dict) else given), 40)
        return one_line(f"'kind': unknown job kind '{tag}': use one of {', '.join(PARAMS)}")
    if kind == "extra_forbidden":
        owner = PARAMS[job.split()[1]] if job and loc[:-1] == ["params"] else None
        fields = f" ({', '.join(owner.model_fields)})" if owner else " (kind, params)" if len(loc) == 1 else ""
        return one_line(f"{job}'{where}' is not a field this API takes: drop it or fix its name{fields}{more}")
    if kind == "value_error":  # one of our checks: its sentence already says the fix
        return one_line(f"{job}'{where}': {str(first.get('msg', '')).removeprefix('Value error, ')}{more}")
    return one_line(f"{job}'{where}': {str(first.get('msg', 'invalid')).lower()}{more}: fix it and send it again")


def _plain_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    """Each problem's place, message and type: the value itself is left out (it may not even be JSON: NaN, bytes)."""
    return [{"loc": [p if isinstance(p, int) else shown(p, 80) for p in e.get("loc", ())],
             "msg": one_line(str(e.get("msg", ""))), "type": str(e.get("type", ""))} for e in exc.errors()]


_HTTP_SENTENCES = {
    400: "the request body could not be read as JSON (nested too deep, a number over 1,000 characters, or not UTF-8): send "
         "the JSON object /openapi.json describes",
    404: "there is no such route: see /openapi.json for the routes",
    405: "this route does not take that method: see /openapi.json for the methods each route takes",
}


def create_app(store: Store, runner: JobRunner, policy: AccessPolicy, *, roots: tuple[Path, ...] = (),
               proxy: Any = None, redactor: Redactor = Redactor(), prices: Any = None) -> FastAPI:
    """The app; ``proxy`` (a ``veriscale.proxy.proxied_request.ProxyService``) adds the three proxy APIs.

    Every document a route returns, and every event of a run's stream, goes through ``redactor``
    (known secret shapes become ``[redacted:KIND]``; the store keeps the raw text). The proxy APIs
    answer with explicit responses and are not redacted: they return the chosen model reply itself.
    ``prices`` (:mod:`veriscale.engine.prices`) adds money to the runs list's cost column.
    """

    class RedactedJSON(JSONResponse):
        def render(self, content: Any) -> bytes:
            return super().render(redactor(content))

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        """At shutdown: close the proxy's backends and every HTTP client opened on this loop."""
        yield
        if proxy is not None:
            await proxy.aclose()
        await close_loop_clients()

    app = FastAPI(title="veriscale", version=__version__, docs_url=None, redoc_url=None, lifespan=lifespan,
                  default_response_class=RedactedJSON,
                  description="Jobs, runs, calls and live progress from the veriscale store.")
    app.add_middleware(Guard, policy=policy)
    log = RunLog(store)
    allowed = tuple(Path(r).resolve() for r in roots)

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": _validation_sentence(exc), "detail": _plain_errors(exc)}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        """FastAPI's own refusals (an unreadable body, an unknown route) in the error shape of the API asked."""
        default = f"the request was refused (HTTP {exc.status_code}): see /openapi.json for what this API takes"
        sentence = _HTTP_SENTENCES.get(exc.status_code, default)
        return JSONResponse(error_document(request.url.path, exc.status_code, sentence), status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(views.NotFound)
    async def not_found(_request: Request, exc: views.NotFound) -> JSONResponse:
        return _error(404, str(exc))

    @app.exception_handler(InvalidParams)
    async def invalid_params(_request: Request, exc: InvalidParams) -> JSONResponse:
        return _error(422, one_line(cli_text(exc.template)))

    @app.exception_handler(UserError)
    async def bad_input(_request: Request, exc: UserError) -> JSONResponse:
        return _error(400, one_line(cli_text(exc.template)))  # settings named as the flags the server was started with

    # -- dashboard ------------------------------------------------------------------------
    @app.get("/", include_in_schema=False)
    async def index(token: str | None = None) -> Any:
        if token is not None:  # one-time login: the token becomes an HttpOnly, same-site cookie
            if policy.token is None or not policy.token_ok({"x-api-key": token}, {}):
                return _error(401, "wrong token: open /?token=<the token the server was started with>")
            response = RedirectResponse("/", status_code=303)
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
            return response
        return FileResponse(STATIC_DIR / "index.html", headers={"cache-control": "no-cache"})

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    # -- runs and calls -------------------------------------------------------------------
    @app.get("/api/health")
    async def health() -> dict[str, Any]:
        """Answers without a token, and says nothing else."""
        return {"status": "ok"}

    @app.get("/api/info")
    async def info() -> dict[str, Any]:
        """The version, the model jobs run on, and whether it is the weak embedded one."""
        return {"version": __version__, "model": getattr(runner.model, "uri", None),
                "embedded": bool(getattr(runner.model, "is_embedded", False)),
                "allow_dirs": [str(r) for r in allowed]}

    @app.get("/api/runs")
    def list_runs(command: str | None = Query(None, description="Only runs of this kind (select, score, track, ...)."),
                  status: str | None = None, q: str | None = None,
                  sort: Literal["id", "score", "cost"] = Query("id", description="id (when it started), score or cost (tokens); runs without a score last."),
                  order: Literal["desc", "asc"] = "desc",
                  min_score: float | None = Query(None, allow_inf_nan=False), max_score: float | None = Query(None, allow_inf_nan=False),
                  min_cost: int | None = Query(None, ge=0, le=MAX_ROW, description="Tokens: prompt sent + completion, cache hits free."),
                  max_cost: int | None = Query(None, ge=0, le=MAX_ROW),
                  offset: int = Query(0, ge=0, le=MAX_ID), limit: int = Query(50, ge=1, le=MAX_PAGE)) -> dict[str, Any]:
        return views.runs_page(store, command=command, status=status, text=q, sort=sort, order=order,
                               score=(min_score, max_score), cost=(min_cost, max_cost), offset=offset, limit=limit,
                               redactor=redactor, prices=prices)

    @app.get("/api/runs/{run_id}")
    def get_run(run_id: RowId) -> dict[str, Any]:
        return views.run_view(store, run_id)

    @app.get("/api/runs/{run_id}/selection")
    def get_selection(run_id: RowId) -> dict[str, Any]:
        return views.selection_view(store, run_id)

    @app.get("/api/runs/{run_id}/progress")
    def get_progress(run_id: RowId) -> dict[str, Any]:
        return views.progress_view(store, run_id)

    @app.get("/api/runs/{run_id}/harness")
    def get_harness(run_id: RowId) -> Any:
        from veriscale.server.harness_view import HarnessViewError, harness_view

        try:
            return harness_view(store, run_id, allowed)
        except HarnessViewError as exc:
            return _error(404, str(exc))

    @app.get("/api/runs/{run_id}/steps")
    def get_steps(run_id: RowId, trajectory: str, offset: int = Query(0, ge=0, le=MAX_ID),
                  limit: int = Query(200, ge=1, le=MAX_PAGE)) -> dict[str, Any]:
        return {"total": log.count_steps(run_id, trajectory), "offset": offset,
                "steps": log.steps(run_id, trajectory, offset, limit)}

    @app.get("/api/runs/{run_id}/steps/find")
    def find_steps(run_id: RowId, trajectory: str, q: str | None = None, errors: bool = False) -> dict[str, Any]:
        if not q and not errors:
            raise UserError("give q=<text> to search for, or errors=true for the failed steps")
        matches = log.find_steps(run_id, trajectory, q, errors=errors)
        if q and redactor.enabled:  # match what the viewer may show, so a search cannot guess a secret
            matches = [i for i in matches
                       if q.lower() in redactor.text(log.steps(run_id, trajectory, i, 1)[0]["text"]).lower()]
        return {"matches": matches, "steps": [i + 1 for i in matches]}  # places (for offset), and step numbers

    @app.get("/api/runs/{run_id}/stream")
    async def stream(run_id: RowId, request: Request, after: int = Query(0, ge=0, le=MAX_ID)) -> StreamingResponse:
        views.run_view(store, run_id)  # 404 before the stream opens
        last = request.headers.get("last-event-id", "")
        start = int(last) if last.isascii() and last.isdigit() and len(last) < 19 else after
        return StreamingResponse(run_stream(store, run_id, start, is_disconnected=request.is_disconnected,
                                            redact=redactor),
                                 media_type="text/event-stream",
                                 headers={"cache-control": "no-cache", "x-accel-buffering": "no"})

    @app.get("/api/runs/{run_id}/calls")
    def run_calls(run_id: RowId) -> dict[str, Any]:
        """Every call the run (and its harness tasks) used, in order, cache hits included."""
        run = views.run_view(store, run_id)
        ids = [run_id] + [c["id"] for c in run["children"]]
        return {"calls": [{**call, "run_id": rid} for rid in ids for call in store.run_calls(rid)]}

    @app.get("/api/calls/{key}")
    def get_call(key: str) -> dict[str, Any]:
        return views.call_view(store, key)

    @app.get("/api/images/{sha256}", response_class=Response,
             responses={200: {"content": {t: {} for t in views.IMAGE_TYPES}, "description": "The image's bytes."}})
    def get_image(sha256: str) -> Response:
        """An image a recorded score call sent, by the sha256 of its bytes (what the call's request names):
        immutable, so cached for good."""
        if not views.IMAGE_DIGEST.fullmatch(sha256):
            return _error(422, f"{shown(sha256, 80)!r} is not an image digest: give the 64 hex digits of the sha256 "
                               "of its bytes, as a call's request names it")
        mime, data = views.image_bytes(store, sha256)
        return Response(data, media_type=mime, headers={"cache-control": "private, max-age=31536000, immutable"})

    # -- jobs -----------------------------------------------------------------------------
    @app.post("/api/jobs", status_code=201)
    def submit_job(job: JobRequest) -> dict[str, Any]:
        return runner.submit(job.kind, job.params.model_dump())

    @app.get("/api/jobs")
    def list_jobs(status: str | None = None, limit: int = Query(100, ge=1, le=MAX_PAGE)) -> dict[str, Any]:
        return {"jobs": runner.listed(runner.table.list(status, limit))}

    @app.get("/api/jobs/{job_id}")
    def get_job(job_id: RowId) -> Any:
        return runner.listed([runner.get(job_id)])[0]  # an unknown id is views.NotFound: 404

    @app.post("/api/jobs/{job_id}/cancel")
    def cancel_job(job_id: RowId) -> Any:
        try:
            return runner.cancel(job_id)
        except UserError as exc:  # a running harness job
            return _error(409, str(exc))

    @app.get("/api/jobs/{job_id}/result")
    def job_result(job_id: RowId) -> Any:
        job = runner.get(job_id)
        if job["status"] in ("queued", "running"):
            return _error(409, f"job {job_id} is {job['status']}: wait for it (GET /api/jobs/{job_id}) or follow "
                               f"its run's stream")
        run = store.run(job["run_id"]) if job["run_id"] is not None else None
        return {"job": job, "run_id": job["run_id"], "status": job["status"], "error": job["error"],
                "result": run.result if run is not None else None}

    if proxy is not None:
        from veriscale.proxy.routes import add_proxy_routes

        add_proxy_routes(app, proxy)
    return app
