"""The user's own restart task: for a job that can only be restarted, stop vN, write vN+1,
then the task the user supplied (``restart_task=``: a ``KubernetesPodOperator``, a
``DatabricksRunNowOperator``, a ``BashOperator`` calling a deploy script ...) starts vN+1 in
place of spark-submit; the ack waits for vN+1's heartbeat. Chosen (after in place and in-app)
whenever a restart task is supplied: the DAG then never launches the job itself."""

from __future__ import annotations

from airflow_samza_expand._protocol.restart.strategy import RestartStrategy

STRATEGY = RestartStrategy(
    mode="task",
    summary=(
        "stop, then the restart task you supply (restart_task=...) starts the new job model; "
        "in place or in-app first when the running job can"
    ),
    launches_standby=False,
    stops_job=True,
    submits_job=True,
    waits_for_drain=True,
    needs_live=False,
    needs_task=True,
    user_task=True,
    fits_reason="the job can only be restarted: the restart task supplied starts v{version}+1",
    acknowledged_by="the processor your restart task started",
)
