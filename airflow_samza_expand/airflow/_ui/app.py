"""The plugin's FastAPI app, mounted by the api-server at ``URL_PREFIX``: HTML pages and a JSON API.

Read-only (GET only). Every route depends on Airflow's own authentication: the api-server's
``get_user`` (a JWT as ``Authorization: Bearer`` or the UI's ``_token`` session cookie) and the
auth manager's ``is_authorized_view(WEBSITE)``; a request without a valid token gets 401/403.
Faults render as a message with a 4xx/503 status (data.UiProblem), never a stack trace.

JSON API (OpenAPI at ``<prefix>/openapi.json`` and a plain page of it at ``<prefix>/docs``, both
behind the same authentication; FastAPI's own docs are off: their Swagger UI loads from a CDN):

* ``GET api/jobs`` - ``{"jobs": [{"name", "sources"}], "problems": [...]}``
* ``GET api/jobs/{job}`` - the job page's data (job model, history, expansions, barrier,
  processors, leases, stop request, log tail, problems)
* ``GET api/jobs/{job}/models/{version}`` - one job model with its SSP -> task mapping
* ``GET api/jobs/{job}/diff?a=&b=`` - what changed between two job model versions

The job page stays true while open: its script fetches ``jobs/{job}/live`` (the page's content)
every few seconds (`live`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response

from airflow_samza_expand.airflow._ui import data, html, live, pages, running_html, views
from airflow_samza_expand.airflow._ui.settings import load_settings

log = logging.getLogger(__name__)

URL_PREFIX = "/samza-expand"
# the external view's route in Airflow's UI: /plugin/<VIEW_ROUTE> + the iframe's own path
VIEW_ROUTE = "expansions"
API_SIGN_IN = (
    "sign in to Airflow first: send a JWT of an Airflow user (POST /auth/token) as "
    "Authorization: Bearer <token>, or the UI's _token session cookie"
)


def _auth_dependency() -> Any:
    from airflow_samza_expand.airflow._compat import website_access

    return Depends(website_access())


def _root(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/")


def _is_api(request: Request) -> bool:
    return request.url.path.removeprefix(_root(request)).startswith("/api/")


def _problem_response(
    request: Request, status: int, title: str, message: str, sign_in: str | None = None
) -> Response:
    if _is_api(request):
        return JSONResponse({"error": title, "detail": message}, status_code=status)
    page = pages.error_page(status, title, message, _root(request), sign_in)
    return HTMLResponse(page, status_code=status)


def _sign_in_url(request: Request) -> str:
    """Airflow's sign-in (``/api/v2/auth/login``, which redirects to the auth manager's page),
    coming back to this page (in the frame it was asked from: Airflow's UI sandboxes the
    external view's iframe without top navigation)."""
    airflow_root = _root(request).removesuffix(URL_PREFIX)
    return f"{airflow_root}/api/v2/auth/login?next={quote(str(request.url), safe='')}"


def _invalid_text(errors: Sequence[Any]) -> str:
    """FastAPI's validation errors as one sentence naming each parameter and what is wrong."""
    out = []
    for error in errors:
        where, *names = [str(x) for x in error.get("loc", ())] or ["input"]
        name = ".".join(names) or where
        if error.get("type") == "missing":
            out.append(f"{where} parameter {name} is missing")
        elif str(error.get("type", "")).startswith("int_"):
            out.append(
                f"{where} parameter {name} must be a whole number, not {error.get('input')!r}"
            )
        else:
            out.append(f"{where} parameter {name}: {error.get('msg', 'invalid')}")
    return "; ".join(out) + " - job model versions are whole numbers, e.g. diff?a=1&b=2"


def _snapshot(job: str) -> data.JobSnapshot:
    return data.read_job(load_settings(), job)


def check_versions(snap: data.JobSnapshot, *versions: int) -> None:
    """UiProblem 404 naming the versions the job has when one of `versions` is missing."""
    missing = [v for v in versions if snap.model(v) is None]
    if not missing:
        return
    have = [f"v{m.version}" for m in snap.history]
    if len(versions) == 1:
        advice = "pick one of those" if have else "write job model v1 first"
    elif len(have) > 1:
        advice = "pick two of those"
    else:
        advice = "a diff needs two versions; there is one after the job's first expansion"
    raise data.UiProblem(
        404,
        "Unknown job model version",
        f"job {snap.job!r} has no job model v{missing[0]} (it has {', '.join(have) or 'none'})"
        f" - {advice}",
    )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _svg(model: Any) -> str:
    from airflow_samza_expand.core._render import render_svg

    return render_svg(model)


def create_app() -> FastAPI:
    """The app the plugin mounts (a new one per call)."""
    app = FastAPI(
        title="Samza expansion UI",
        description=__doc__,
        dependencies=[_auth_dependency()],
        openapi_url=None,  # served below, behind the authentication every route has
        docs_url=None,
        redoc_url=None,
    )

    @app.exception_handler(data.UiProblem)
    async def _problem(request: Request, exc: data.UiProblem) -> Response:
        return _problem_response(request, exc.status, exc.title, exc.message)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> Response:
        if _is_api(request):  # the documented {"error", "detail"}, as every other fault
            title = str(exc.detail)
            message = API_SIGN_IN if exc.status_code in (401, 403) else title
            return JSONResponse(
                {"error": title, "detail": message},
                status_code=exc.status_code,
                headers=getattr(exc, "headers", None),
            )
        if exc.status_code in (401, 403):
            message = "Sign in to Airflow first, then reload this page."
            sign_in = _sign_in_url(request)
            return _problem_response(request, exc.status_code, str(exc.detail), message, sign_in)
        return _problem_response(request, exc.status_code, str(exc.detail), str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        return _problem_response(request, 400, "Bad input", _invalid_text(exc.errors()))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:
        log.exception("samza-expand UI: %s failed", request.url.path)
        return _problem_response(
            request,
            503,
            "Could not read the job",
            f"{type(exc).__name__}: {exc} - see the api-server log",
        )

    @app.get("/openapi.json", include_in_schema=False)
    def openapi() -> dict[str, Any]:
        return app.openapi()

    @app.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    def docs(request: Request) -> str:
        return pages.api_page(app.openapi(), _root(request))

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def jobs_page(request: Request) -> str:
        jobs, problems = data.list_jobs(load_settings())
        return html.jobs_page(jobs, _root(request), "; ".join(problems))

    @app.get("/jobs/{job}", response_class=HTMLResponse, include_in_schema=False)
    def job_page(request: Request, job: str) -> str:
        snap = _snapshot(job)
        svg = _svg(snap.latest) if html.inline_details(snap.latest) else ""  # else on demand
        return html.job_page(snap, _root(request), svg, _now())

    @app.get("/jobs/{job}/live", response_class=HTMLResponse, include_in_schema=False)
    def live_fragment(request: Request, job: str) -> Response:
        """The job page's content alone, which the open page fetches again (`live`), with
        the server's time (the page counts ages and expiries on it)."""
        snap = _snapshot(job)
        svg = _svg(snap.latest) if html.inline_details(snap.latest) else ""  # else on demand
        content = html.job_content(snap, _root(request), svg)
        return HTMLResponse(content, headers={live.NOW_HEADER: _now(), "Cache-Control": "no-store"})

    @app.get("/jobs/{job}/running", response_class=HTMLResponse, include_in_schema=False)
    def running_fragment(job: str) -> str:
        """The job page's "Expansion under way" section alone ("" once none runs)."""
        return running_html.running_fragment(_snapshot(job))

    @app.get("/jobs/{job}/diff", response_class=HTMLResponse, include_in_schema=False)
    def diff_page(request: Request, job: str, a: int, b: int) -> str:
        snap = _snapshot(job)
        check_versions(snap, a, b)
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
        check_versions(snap, version)
        return views.model_json(snap.model(version))  # type: ignore[arg-type]

    @app.get("/api/jobs/{job}/diff", summary="What changed between job models a and b")
    def api_diff(job: str, a: int, b: int) -> dict[str, Any]:
        snap = _snapshot(job)
        check_versions(snap, a, b)
        return views.diff_models(snap.model(a), snap.model(b))  # type: ignore[arg-type]

    return app
