"""The plugin's FastAPI app, mounted by the api-server at ``URL_PREFIX``: HTML pages and a JSON API.

Read-only (GET only). Every route depends on Airflow's own authentication: the api-server's
``get_user`` (a JWT as ``Authorization: Bearer`` or the UI's ``_token`` session cookie) and the
auth manager's ``is_authorized_view(WEBSITE)``; a request without a valid token gets 401/403.
Faults render as a message with a 4xx/503 status (data.UiProblem), never a stack trace.

JSON API (OpenAPI at ``<prefix>/openapi.json``, browsable at ``<prefix>/docs``):

* ``GET api/jobs`` - ``{"jobs": [{"name", "sources"}], "problems": [...]}``
* ``GET api/jobs/{job}`` - the job page's data (job model, history, expansions, barrier,
  processors, leases, stop request, log tail, problems)
* ``GET api/jobs/{job}/models/{version}`` - one job model with its SSP -> task mapping
* ``GET api/jobs/{job}/diff?a=&b=`` - what changed between two job model versions
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from airflow_samza_expand.airflow.ui import data, html, views
from airflow_samza_expand.airflow.ui.settings import load_settings

log = logging.getLogger(__name__)

URL_PREFIX = "/samza-expand"


def _auth_dependency() -> Any:
    from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
    from airflow.api_fastapi.core_api.security import requires_access_view

    return Depends(requires_access_view(AccessView.WEBSITE))


def _root(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/")


def _is_api(request: Request) -> bool:
    return request.url.path.removeprefix(_root(request)).startswith("/api/")


def _problem_response(request: Request, status: int, title: str, message: str) -> Response:
    if _is_api(request):
        return JSONResponse({"error": title, "detail": message}, status_code=status)
    return HTMLResponse(html.error_page(status, title, message, _root(request)), status_code=status)


def _snapshot(job: str) -> data.JobSnapshot:
    return data.read_job(load_settings(), job)


def _two_models(snap: data.JobSnapshot, a: int, b: int) -> None:
    missing = [v for v in (a, b) if snap.model(v) is None]
    if missing:
        have = ", ".join(f"v{m.version}" for m in snap.history) or "none"
        raise data.UiProblem(
            404,
            "Unknown job model version",
            f"job {snap.job!r} has no job model v{missing[0]} (it has {have}) - pick two of those",
        )


def _svg(model: Any) -> str:
    from airflow_samza_expand.core.render import render_svg

    return render_svg(model)


def create_app() -> FastAPI:
    """The app the plugin mounts (a new one per call)."""
    app = FastAPI(
        title="Samza expansion UI",
        description=__doc__,
        dependencies=[_auth_dependency()],
    )

    @app.exception_handler(data.UiProblem)
    async def _problem(request: Request, exc: data.UiProblem) -> Response:
        return _problem_response(request, exc.status, exc.title, exc.message)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> Response:
        if _is_api(request):
            return JSONResponse({"detail": exc.detail}, status_code=exc.status_code)
        message = (
            "Sign in to Airflow first, then reload this page."
            if exc.status_code in (401, 403)
            else str(exc.detail)
        )
        return _problem_response(request, exc.status_code, str(exc.detail), message)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:
        log.exception("samza-expand UI: %s failed", request.url.path)
        return _problem_response(
            request,
            503,
            "Could not read the job",
            f"{type(exc).__name__}: {exc} - see the api-server log",
        )

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def jobs_page(request: Request) -> str:
        jobs, problems = data.list_jobs(load_settings())
        return html.jobs_page(jobs, _root(request), "; ".join(problems))

    @app.get("/jobs/{job}", response_class=HTMLResponse, include_in_schema=False)
    def job_page(request: Request, job: str) -> str:
        snap = _snapshot(job)
        svg = _svg(snap.latest) if snap.latest is not None else ""
        return html.job_page(snap, _root(request), svg)

    @app.get("/jobs/{job}/diff", response_class=HTMLResponse, include_in_schema=False)
    def diff_page(request: Request, job: str, a: int, b: int) -> str:
        snap = _snapshot(job)
        _two_models(snap, a, b)
        return html.diff_page(snap, a, b, _root(request))

    @app.get("/jobs/{job}/buckets.svg", include_in_schema=False)
    def buckets_svg(job: str) -> Response:
        snap = _snapshot(job)
        if snap.latest is None:
            raise data.UiProblem(404, "No job model", f"job {job!r} has no job model yet")
        return Response(_svg(snap.latest), media_type="image/svg+xml")

    @app.get("/api/jobs", summary="The jobs: configured and found as coordinator topics")
    def api_jobs() -> dict[str, Any]:
        jobs, problems = data.list_jobs(load_settings())
        return {"jobs": [asdict(j) for j in jobs], "problems": problems}

    @app.get("/api/jobs/{job}", summary="A job's models, expansions, barrier, processors, log")
    def api_job(job: str) -> dict[str, Any]:
        return views.snapshot_json(_snapshot(job))

    @app.get("/api/jobs/{job}/models/{version}", summary="One job model with its mapping")
    def api_model(job: str, version: int) -> dict[str, Any]:
        snap = _snapshot(job)
        _two_models(snap, version, version)
        return views.model_json(snap.model(version))  # type: ignore[arg-type]

    @app.get("/api/jobs/{job}/diff", summary="What changed between job models a and b")
    def api_diff(job: str, a: int, b: int) -> dict[str, Any]:
        snap = _snapshot(job)
        _two_models(snap, a, b)
        return views.diff_models(snap.model(a), snap.model(b))  # type: ignore[arg-type]

    return app
