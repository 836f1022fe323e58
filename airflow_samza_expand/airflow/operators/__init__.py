"""Operators of the partition expansion: plan, expand, stop the job, write job model vN+1."""

from airflow_samza_expand.airflow.operators._expand import ExpandPartitionsOperator
from airflow_samza_expand.airflow.operators._plan import PlanExpansionOperator
from airflow_samza_expand.airflow.operators._stop import StopStatefulJobOperator
from airflow_samza_expand.airflow.operators._write_model import WriteJobModelOperator

__all__ = [
    "ExpandPartitionsOperator",
    "PlanExpansionOperator",
    "StopStatefulJobOperator",
    "WriteJobModelOperator",
]
