"""The provider's Airflow plugin (``get_provider_info()["plugins"]``): the expansion UI.

A FastAPI app served by the api-server under ``/samza-expand`` (HTML pages and a JSON API, see
``airflow.ui.app``), shown in the Airflow UI as an *external view* (a nav entry rendering the
pages in an iframe), and the report step's extra link to the job page. See docs/ui.md.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_samza_expand.airflow.ui.app import URL_PREFIX, create_app
from airflow_samza_expand.airflow.ui.links import ExpansionJobLink

PLUGIN_NAME = "samza_expand"


class SamzaExpandPlugin(AirflowPlugin):
    """Expansion pages: jobs, job models and their history, expansions, barrier, processors."""

    name = PLUGIN_NAME
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Samza expansion UI"}]
    external_views = [
        {
            "name": "Samza expansion",
            "href": f"{URL_PREFIX.lstrip('/')}/",
            "destination": "nav",
            "category": "browse",
            "url_route": "samza-expand",
        }
    ]
    operator_extra_links = [ExpansionJobLink()]
