"""Example: expand the input topic of a live stateful PySpark job from the Airflow trigger form.

Trigger ``samza_expand`` with the form (topic, factor 2/4/8/16, job name, grace seconds, barrier
timeout, dry run, other jobs, on stale placement: ``warn`` or ``fail`` when a producer kept the
old partition count after the barrier snapshot). *Other jobs*: when another stateful
job managed by this provider reads the topic, ``refuse`` (default) fails the plan naming every
such job (expand them together with ``JobSettings(jobs=[...])``); ``ignore`` grows the
topic for this job anyway, with a warning. Consumer groups outside the provider that read the
topic are warnings in the plan and the report either way. The job is the shipped PySpark job
(``airflow_samza_expand/spark/job.py``) running continuously; its settings come from environment
variables of the Airflow workers:

* ``SAMZA_EXPAND_BOOTSTRAP_SERVERS`` - Kafka bootstrap servers the job reads (default
  ``localhost:9092``; the DAG's own Kafka clients use the ``kafka_default`` connection);
* ``SAMZA_EXPAND_CHECKPOINT_ROOT`` - the job's checkpoint is ``<root>/<job name>``;
* ``SAMZA_EXPAND_OUTPUT_TOPIC`` - where the job writes its per-key results;
* ``SAMZA_EXPAND_RUN_MODE`` - ``continuous`` (default) or ``available-now``.
"""

from __future__ import annotations

import os

from airflow.sdk import Param

from airflow_samza_expand.dags import (
    BarrierSettings,
    GrowthSettings,
    JobSettings,
    OwnershipSettings,
    build_expansion_dag,
    stream_job_args_from_env,
)

JOB = "{{ params.job_name }}"
RUN_MODE = os.environ.get("SAMZA_EXPAND_RUN_MODE", "continuous")

dag = build_expansion_dag(
    "samza_expand",
    job=JobSettings(
        name=JOB,
        topics="{{ params.topic }}",
        run_mode=RUN_MODE,
        application_args=stream_job_args_from_env(JOB),
    ),
    barrier=BarrierSettings(
        producer_refresh_grace_s="{{ params.grace_seconds }}",
        barrier_timeout_s="{{ params.barrier_timeout_seconds }}",
        on_stale_placement="{{ params.on_stale_placement }}",
    ),
    ownership=OwnershipSettings(other_jobs="{{ params.other_jobs }}"),
    growth=GrowthSettings(factor="{{ params.factor }}"),
    dry_run="{{ params.dry_run }}",
    params={
        "topic": Param("orders", type="string", minLength=1, title="Input topic to expand"),
        "factor": Param(
            2,
            type="integer",
            enum=[2, 4, 8, 16],
            title="Growth factor",
            description="New partition count = current count x factor (a power of two).",
        ),
        "job_name": Param(
            "orders-counter",
            type="string",
            minLength=1,
            title="Job name",
            description="The stateful job; also its consumer group and coordinator topic.",
        ),
        "grace_seconds": Param(
            300,
            type="integer",
            minimum=0,
            title="Producer refresh grace (s)",
            description="At least the producers' metadata.max.age.ms / "
            "topic.metadata.refresh.interval.ms.",
        ),
        "barrier_timeout_seconds": Param(
            3600, type="integer", minimum=1, title="Barrier timeout (s)"
        ),
        "dry_run": Param(
            False,
            type="boolean",
            title="Dry run",
            description="Plan and validate the growth only; change nothing.",
        ),
        "other_jobs": Param(
            "refuse",
            type="string",
            enum=["refuse", "ignore"],
            title="Other managed jobs reading the topic",
            description="refuse: fail the plan naming them (expand them together with "
            "JobSettings(jobs=[...])); ignore: grow for this job anyway, with a warning.",
        ),
        "on_stale_placement": Param(
            "warn",
            type="string",
            enum=["warn", "fail"],
            title="On a stale placement after the barrier",
            description="A producer that kept the old partition count after the barrier "
            "snapshot puts its keys' order at risk. warn: count, log and report them; fail: "
            "also fail the report step naming the keys and stop the job.",
        ),
    },
    doc_md=__doc__,
)
