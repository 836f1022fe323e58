"""The ``report`` step's extra link to the job's page in the plugin.

Registered by the plugin for ``ExpansionReportOperator`` (``operator_extra_links`` with
``operators``), so no DAG or operator changes: Airflow attaches it to every report task when the
api-server deserializes the DAG. The job name comes from the report's XCom (``job_name`` of the
summary), else from the operator's ``job_name`` when it is not a template.
"""

from __future__ import annotations

from typing import Any, ClassVar
from urllib.parse import quote, urlsplit

from airflow.sdk import BaseOperatorLink

from airflow_samza_expand.airflow._compat import task_xcom
from airflow_samza_expand.airflow._ui.app import URL_PREFIX, VIEW_ROUTE
from airflow_samza_expand.airflow.operators._report import ExpansionReportOperator


def job_page_url(job: str) -> str:
    """The job page inside Airflow's UI, under the api-server's ``[api] base_url``
    (root-relative when unset): the external view's route followed by the page's own path,
    which Airflow's UI loads in the view's iframe (and keeps in its address bar)."""
    from airflow.configuration import conf

    base = str(conf.get("api", "base_url", fallback="") or "").rstrip("/")
    root = urlsplit(base).path.rstrip("/")  # the api-server's own path prefix, if any
    return f"{base}/plugin/{VIEW_ROUTE}{root}{URL_PREFIX}/jobs/{quote(job, safe='')}"


def _report_job_name(ti_key: Any) -> str | None:
    summary = task_xcom(ti_key.dag_id, ti_key.run_id, ti_key.task_id, ti_key.map_index)
    name = summary.get("job_name") if isinstance(summary, dict) else None
    return str(name) if name else None


class ExpansionJobLink(BaseOperatorLink):
    """The "Expansion job page" link: the job the report step summarised, in Airflow's UI."""

    name = "Expansion job page"
    operators: ClassVar[list[type]] = [ExpansionReportOperator]

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        job = _report_job_name(ti_key)
        if job is None:
            declared = getattr(operator, "job_name", None)
            job = declared if isinstance(declared, str) and "{{" not in declared else None
        return job_page_url(job) if job else ""
