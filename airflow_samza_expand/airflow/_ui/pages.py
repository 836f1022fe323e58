"""The plugin's pages besides the jobs and the job: a fault (4xx/503) and the JSON API's routes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_samza_expand.airflow._ui.markup import _e, page, table


def error_page(status: int, title: str, message: str, root: str, sign_in: str | None = None) -> str:
    """A fault as a page; with `sign_in` (401/403) a link to Airflow's sign-in instead of
    "All jobs" (which would be refused too)."""
    link = (
        f"<a href='{_e(sign_in)}'>Sign in to Airflow</a>"
        if sign_in
        else f"<a href='{_e(root)}/'>All jobs</a>"
    )
    body = (
        f"<h1>{_e(title)}</h1><div class='box'><p>{_e(message)}</p>"
        f"<p class='muted'>HTTP {status}. Nothing was changed: these pages only read.</p></div>"
        f"<p>{link}</p>"
    )
    return page(title, body, root, home=not sign_in)


def api_page(schema: Mapping[str, Any], root: str) -> str:
    """The JSON API's routes from the OpenAPI schema (no Swagger UI: nothing loads from a CDN)."""
    rows = [
        [f"<code>GET {_e(root)}{_e(path)}</code>", _e(op.get("summary", ""))]
        for path, ops in sorted(schema.get("paths", {}).items())
        for method, op in ops.items()
        if method == "get"
    ]
    body = (
        "<h1>JSON API</h1>"
        + table(["route", "returns"], rows)
        + f"<p>OpenAPI: <a href='{_e(root)}/openapi.json'>openapi.json</a>. Errors are "
        '<code>{"error": title, "detail": message}</code> with a 4xx/503 status.</p>'
    )
    return page("JSON API", body, root)
