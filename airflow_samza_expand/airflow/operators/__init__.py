"""Operators of the partition expansion: plan, expand, stop the job, write job model vN+1, submit
the job (and its restart gate), launch a standby, report the expansion and a multi-job run."""

from airflow_samza_expand.airflow.operators._expand import ExpandPartitionsOperator
from airflow_samza_expand.airflow.operators._jobs_report import JobsReportOperator
from airflow_samza_expand.airflow.operators._plan import PlanExpansionOperator
from airflow_samza_expand.airflow.operators._report import ExpansionReportOperator
from airflow_samza_expand.airflow.operators._standby import LaunchStandbyOperator
from airflow_samza_expand.airflow.operators._stop import StopStatefulJobOperator
from airflow_samza_expand.airflow.operators._submit import (
    RestartGateOperator,
    SubmitStreamJobOperator,
)
from airflow_samza_expand.airflow.operators._write_model import WriteJobModelOperator

__all__ = [
    "ExpandPartitionsOperator",
    "ExpansionReportOperator",
    "JobsReportOperator",
    "LaunchStandbyOperator",
    "PlanExpansionOperator",
    "RestartGateOperator",
    "StopStatefulJobOperator",
    "SubmitStreamJobOperator",
    "WriteJobModelOperator",
]
