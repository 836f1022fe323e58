"""The provider's Airflow plugin (``get_provider_info()["plugins"]``): the expansion UI.

A FastAPI app served by the api-server under ``/samza-expand`` (HTML pages and a JSON API, see
``airflow._ui.app``), shown in the Airflow UI as an *external view* (a nav entry rendering the
pages in an iframe at ``/plugin/<VIEW_ROUTE>/...``), and the report step's extra link to the
job page. See docs/ui.md.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_samza_expand.airflow._ui.app import URL_PREFIX, VIEW_ROUTE, create_app
from airflow_samza_expand.airflow._ui.links import ExpansionJobLink

PLUGIN_NAME = "samza_expand"


class SamzaExpandPlugin(AirflowPlugin):
    """Expansion pages: jobs, job models and their history, expansions, barrier, processors."""

    name = PLUGIN_NAME
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Samza expansion UI"}]
    external_views = [
        {
            "name": "Samza expansion",
            # relative to the UI's <base href> (the api-server's root): the app's jobs page
            "href": f"{URL_PREFIX.lstrip('/')}/",
            "destination": "nav",
            "category": "browse",
            # Airflow's UI shows /plugin/<url_route> + the iframe's path: a route other than
            # the app's prefix, or the address reads /plugin/samza-expand/samza-expand/
            "url_route": VIEW_ROUTE,
        }
    ]
    operator_extra_links = [ExpansionJobLink()]


__all__ = ["PLUGIN_NAME", "SamzaExpandPlugin"]
