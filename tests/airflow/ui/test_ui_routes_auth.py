"""Every route of the plugin's app refuses a request without a token (401), read from the app
object itself (`airflow._ui.app.create_app().routes`), so a route added later is covered without
an edit here. Against the real api-server that mounts the app (tests/airflow/ui/conftest.py)."""

from __future__ import annotations

import pytest
from ui_helpers import http

pytestmark = pytest.mark.kafka

# the issue that asked for this test counted eleven routes; fewer found means the walk broke
KNOWN_ROUTES = 11


def app_requests(job: str) -> list[tuple[str, str]]:
    """(method, path under the app's prefix) for every route of the app, its path parameters
    filled (``job``: the UI's job, others ``1``) and its required query parameters given ``1``
    and ``2`` (a real page once signed in: a diff of versions 1 and 2)."""
    from fastapi.routing import APIRoute

    from airflow_samza_expand.airflow._ui.app import URL_PREFIX, create_app

    requests = []
    for route in create_app().routes:
        assert isinstance(route, APIRoute), f"a route that is not an APIRoute: {route!r}"
        path = route.path_format
        for param in route.dependant.path_params:
            path = path.replace(f"{{{param.name}}}", job if param.name == "job" else "1")
        query = [p.name for p in route.dependant.query_params if p.field_info.is_required()]
        if query:
            path += "?" + "&".join(f"{n}={i}" for i, n in enumerate(query, start=1))
        requests += [(method, URL_PREFIX + path) for method in sorted(route.methods)]
    return requests


def test_every_route_of_the_app_refuses_a_request_without_a_token(
    api_server, token, expanded_job
) -> None:
    requests = app_requests(expanded_job.job)
    assert len({path for _, path in requests}) >= KNOWN_ROUTES, requests
    assert {method for method, _ in requests} == {"GET"}, "the app is read-only"
    wrong = {}
    for method, path in requests:
        url = f"{api_server.base}{path}"
        status, body = http(method, url)
        if status != 401 or expanded_job.topic in body:
            wrong[path] = f"no token: {status}"
        status, body = http(method, url, token="not-a-jwt")
        if status not in (401, 403) or expanded_job.topic in body:
            wrong[path] = f"a bad token: {status}"
        # signed in, the same request reaches the route (the 401 above was the token's)
        status, _ = http(method, url, token=token)
        if status in (401, 403, 404):
            wrong[path] = f"signed in: {status}"
    assert not wrong, wrong
