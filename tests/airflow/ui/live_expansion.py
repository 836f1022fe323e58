"""The factory's expansion DAG of the live UI test, and its runner in a process of its own
(``python live_expansion.py SPEC``): the test serializes the same DAG into the metadata
database, starts this runner and watches the page while ``dag.test()`` runs the expansion.

SPEC (JSON): the keyword arguments of `build`. The process inherits the test's AIRFLOW_HOME,
its connections and the PATH whose ``spark-submit`` is `throttled_job.py`; it prints one JSON
line ``{"run_id", "state", "tasks": {task_id: state}}``.
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from typing import Any


def build(
    *, dag_id: str, job_name: str, topic: str, bootstrap: str, log_dir: str, grace_s: float
) -> Any:
    """The shipped chain with short waits: the producer refresh grace `grace_s`, polls every
    0.5 s, no retries; the job (`throttled_job.py` as ``spark-submit``) advertises the standby
    capability, so the plan picks the warm restart."""
    from airflow_samza_expand import dags

    args = dags.stream_job_args(
        job_name=job_name,
        bootstrap_servers=bootstrap,
        checkpoint_dir=f"{log_dir}/checkpoint",
        output_topic=f"{topic}-out",
    )
    return dags.build_expansion_dag(
        dag_id,
        job=dags.JobSettings(name=job_name, topics=[topic], application_args=args),
        barrier=dags.BarrierSettings(producer_refresh_grace_s=grace_s, barrier_timeout_s=180.0),
        restart=dags.RestartSettings(
            stop_timeout_s=60.0, standby_warm_timeout_s=60.0, ack_timeout_s=120.0
        ),
        kafka=dags.KafkaSettings(check_partitioner=False),
        # the stand-in starts in well under 1 s
        spark=dags.SparkSettings(log_dir=log_dir, submit_kwargs={"startup_check_s": 1.0}),
        poll_interval_s=0.5,
        retries=0,
        retry_delay=timedelta(seconds=1),
    )


def main(spec_text: str) -> int:
    dag = build(**json.loads(spec_text))
    run = dag.test()
    from airflow.utils.session import create_session

    with create_session() as session:
        tasks = {ti.task_id: str(ti.state) for ti in run.get_task_instances(session=session)}
    print(json.dumps({"run_id": run.run_id, "state": str(run.state), "tasks": tasks}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
