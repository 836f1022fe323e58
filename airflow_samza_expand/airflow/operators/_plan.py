"""PlanExpansionOperator: validate an expansion, take the job's expansion lease and record it."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from airflow.configuration import conf
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from airflow_samza_expand._protocol import restart as restart_strategies
from airflow_samza_expand._protocol.ownership import DEFAULT_LEASE_TTL_S
from airflow_samza_expand._protocol.steps.plan import step as protocol_plan
from airflow_samza_expand._protocol.steps.plan.job_models import jobs_with_models
from airflow_samza_expand._protocol.steps.plan.readers import (
    TopicReaders,
    find_readers,
    managed_job_names,
    normalise_other_jobs,
)
from airflow_samza_expand._protocol.steps.plan.wait import (
    DEFAULT_JOB_DOWN_TIMEOUT_S,
    JobDownError,
    job_down_refusal,
)
from airflow_samza_expand.airflow._shell import (
    DEFAULT_CONN_ID,
    KafkaClients,
    as_bool,
    as_int,
    holder_of,
    protocol_outcomes,
)
from airflow_samza_expand.airflow.hooks import DEFAULT_COORDINATOR
from airflow_samza_expand.airflow.triggers import (
    ExpansionLeaseTrigger,
    JobBackTrigger,
    PollingTrigger,
    wait_in_worker,
)
from airflow_samza_expand.core._plan import DEFAULT_MAX_PARTITIONS
from airflow_samza_expand.core.errors import LeaseHeldError
from airflow_samza_expand.core.policy import GrowthPolicy


class PlanExpansionOperator(KafkaClients, BaseOperator):
    """Plan growing the job's input topics and record the plan as an expansion record.

    Checks, changing nothing on refusal (``AirflowFailException``): every topic exists, each
    growth is ``x2^k`` of the job model's count (never a shrink), at most ``max_partitions``,
    the job's grouper keeps state on expansion, and sampled keyed records sit at
    ``hash(key) % N`` under murmur2 or CRC32 (``check_partitioner``). Logs the job's lag.

    A job without a job model (a mistyped name, a job never initialised) is refused before
    anything is written: no coordinator topic created, no lease taken; the message names
    ``samza-expand init-job`` and the jobs that have a job model, close names first.

    Ownership (docs/design.md 'Ownership, leases and fencing'): the plan takes the job's expansion
    lease for this DAG run (``airflow:<dag_id>/<run_id>``). A rerun of the run finds the expansion
    it planned, done or not. While another run holds the lease, the task waits deferred; when it is
    free and the expansion it joined has completed, the task ends *skipped* (XCom ``joined`` names
    the holder and the expansion), and so do the steps after it.

    Targets: ``targets={"orders": 8}``, or ``topics=["orders"]`` with ``factor`` (default 2)
    applied to the job model's counts, or (``follow_live_counts``) the topics' live counts: a
    job model that already matches them is nothing to do (skipped, never failed).
    ``dry_run``: validate and return the plan, write nothing (no record, no lease).
    ``policy`` (`GrowthPolicy` or its dict): measure each topic first and grow only the topics
    whose figures cross a threshold, by the factor the policy computes; with none crossed the
    task ends *skipped* with the figures in its log (nothing written, nothing grown).
    Other readers (protocol.readers): the plan finds the managed jobs whose job model reads a
    grown topic (coordinator topics of the connection, or ``managed_jobs=[...]``) and the
    consumer groups outside the provider with committed offsets on it. ``other_jobs``:
    ``"refuse"`` (default) fails the task (``AirflowFailException`` naming every job and the fix)
    while another managed job reads the topic and is not among ``co_jobs`` (the jobs the same run
    expands; ``"include"`` is what the multi-job factory passes with them); ``"ignore"`` goes on
    with a warning. Unmanaged groups are warning lines and ``unmanaged_groups`` in the XCom.
    ``restart`` (``"auto"``/``"in-place"``/``"warm"``/``"cold"``; None: choose none): the
    restart this expansion uses, chosen from what the running processors advertise
    and kept in the record (`_protocol.restart.choose_restart`); ``"in-place"`` or ``"warm"``
    for a job whose processors do not say they can is refused here, before anything changes.
    ``owns_launch`` (True): the DAG may launch the job (it names an application or a restart
    task). False: the plan chooses only a restart that launches nothing (in place, in-app;
    else a refusal naming the processors), and finding no live processor of the newest job
    model it changes nothing and waits deferred up to ``job_down_timeout_s`` for the job to
    come back, then fails (``AirflowFailException`` naming the job, its last heartbeat and
    what to do; a dry run fails at once).
    ``deferrable`` (default: Airflow's ``[operators] default_deferrable``): both waits (for
    another run's lease, for the job to come back) go to the triggerer (`ExpansionLeaseTrigger`,
    `JobBackTrigger`) and hold no worker slot; False: the worker polls the same trigger's poll
    every ``poll_interval_s`` and ends the same way.
    Returns (XCom) ``{expansion_id, plan, lag, conformance, reused, outcome, dry_run, policy,
    readers, unmanaged_groups, restart}``.
    """

    template_fields: Sequence[str] = (
        "job_name",
        "targets",
        "topics",
        "factor",
        "coordinator",
        "dry_run",
        "max_partitions",
        "other_jobs",
        "co_jobs",
        "owns_launch",
    )
    template_fields_renderers = {"targets": "json"}
    ui_color = "#efe3ff"

    def __init__(
        self,
        *,
        job_name: str,
        targets: Mapping[str, int] | None = None,
        topics: str | Sequence[str] | None = None,
        factor: int | str = 2,
        follow_live_counts: bool = False,
        require_power_of_two: bool = True,
        max_partitions: int | str = DEFAULT_MAX_PARTITIONS,
        check_partitioner: bool = True,
        sample_per_partition: int = 100,
        consumer_group: str | None = None,
        dry_run: bool | str = False,
        policy: GrowthPolicy | Mapping[str, Any] | None = None,
        other_jobs: str = "refuse",
        co_jobs: Sequence[str] = (),
        managed_jobs: Sequence[str] | None = None,
        lease_ttl_s: float = DEFAULT_LEASE_TTL_S,
        poll_interval_s: float = 10.0,
        restart: str | None = None,
        owns_launch: Any = True,
        job_down_timeout_s: float = DEFAULT_JOB_DOWN_TIMEOUT_S,
        coordinator: str = DEFAULT_COORDINATOR,
        kafka_config_id: str = DEFAULT_CONN_ID,
        request_timeout_s: float = 30.0,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if (targets is None) == (topics is None):
            raise ValueError(
                f"{self.task_id}: pass exactly one of targets={{'topic': count}} or "
                f"topics=['topic'] (with factor=2)"
            )
        self.job_name = job_name
        self.targets = targets
        self.topics = topics
        self.factor = factor
        self.follow_live_counts = follow_live_counts
        self.require_power_of_two = require_power_of_two
        self.max_partitions = max_partitions
        self.check_partitioner = check_partitioner
        self.sample_per_partition = sample_per_partition
        self.consumer_group = consumer_group
        self.dry_run = dry_run
        # A bad policy fails at DAG parse time (InvalidPolicyError names the fix).
        self.policy = GrowthPolicy.from_dict(policy) if isinstance(policy, Mapping) else policy
        if self.policy is not None and targets is not None:
            raise ValueError(
                f"{self.task_id}: a growth policy decides the factor itself - pass topics=[...] "
                "with policy=..., not targets"
            )
        if "{{" not in str(other_jobs):
            normalise_other_jobs(other_jobs)  # a bad choice fails at parse time
        self.other_jobs = other_jobs
        # a list, or (jobs="all") the mapped task group's argument, resolved when rendered
        self.co_jobs = list(co_jobs) if isinstance(co_jobs, Iterable) else co_jobs
        self.managed_jobs = list(managed_jobs) if managed_jobs is not None else None
        self.lease_ttl_s = lease_ttl_s
        self.poll_interval_s = poll_interval_s
        asked = restart_strategies.normalise_restart(restart, error=ValueError) if restart else None
        self.restart = asked
        # a bool, or (jobs="all") the mapped group's application: None when the DAG owns none
        self.owns_launch = owns_launch
        self.job_down_timeout_s = job_down_timeout_s
        self.coordinator = coordinator
        self.kafka_config_id = kafka_config_id
        self.request_timeout_s = request_timeout_s
        self.deferrable = deferrable

    def request(self) -> protocol_plan.PlanRequest:
        topics = [self.topics] if isinstance(self.topics, str) else list(self.topics or [])
        return protocol_plan.PlanRequest(
            job_name=self.job_name,
            targets=dict(self.targets) if self.targets else None,
            topics=tuple(topics),
            factor=as_int(self.factor, "factor"),
            follow_live_counts=self.follow_live_counts,
            require_power_of_two=self.require_power_of_two,
            max_partitions=as_int(self.max_partitions, "max_partitions"),
            check_partitioner=self.check_partitioner,
            sample_per_partition=self.sample_per_partition,
            consumer_group=self.consumer_group,
            dry_run=as_bool(self.dry_run),
            request_timeout_s=self.request_timeout_s,
            policy=self.policy,
            other_jobs=normalise_other_jobs(self.other_jobs),
            co_jobs=tuple(self.co_jobs),
            restart=self.restart,
            launches=self.launches,
        )

    @property
    def launches(self) -> bool:
        """Whether the DAG may launch the job (``owns_launch`` as rendered)."""
        return bool(self.owns_launch) and str(self.owns_launch).strip().lower() != "false"

    def discover(self, topics: Sequence[str]) -> TopicReaders:
        """The other readers of `topics` (managed jobs, unmanaged consumer groups)."""
        groups = {self.job_name: self.consumer_group} if self.consumer_group else {}
        return find_readers(
            self.admin,
            topics,
            coordinator=self.coordinator,
            open_job=lambda name: self.hook.get_coordinator_store(
                name, self.coordinator, self.kafka_config
            ),
            managed_jobs=self.managed_jobs,
            groups_of=groups,
        )

    def known_jobs(self) -> list[str]:
        """The jobs with a job model on this connection (coordinator topics, or
        ``managed_jobs``), close names to ``job_name`` first: named when it has none."""
        names = managed_job_names(self.admin, self.coordinator, self.managed_jobs)
        return jobs_with_models(
            names,
            lambda name: self.hook.get_coordinator_store(name, self.coordinator, self.kafka_config),
            exclude=self.job_name,
        )

    def execute(self, context: Any, joined_holder: str | None = None) -> dict[str, Any]:
        holder = holder_of(context)
        held: LeaseHeldError | None = None
        down: JobDownError | None = None
        try:
            with protocol_outcomes():
                try:
                    outcome = protocol_plan.plan(
                        self.store,
                        self.admin,
                        self.request(),
                        holder,
                        kafka_config=self.kafka_config,
                        joined_holder=joined_holder,
                        lease_ttl_s=self.lease_ttl_s,
                        discover=self.discover,
                        known_jobs=self.known_jobs,
                    )
                except LeaseHeldError as exc:
                    held = exc
                except JobDownError as exc:
                    if self.request().dry_run or float(self.job_down_timeout_s) <= 0:
                        raise
                    down = exc
        finally:
            self.close_clients()
        if held is not None:
            return self._wait_for(context, holder, held)
        if down is not None:
            return self._wait_for_job(context, down)
        self.log.info("%s.", outcome.message)
        for line in (outcome.extra.get("readers") or {}).get("warnings", []):
            self.log.warning("%s", line)
        if outcome.kind == protocol_plan.NOTHING:
            joined = {
                "holder": joined_holder,
                "expansion_id": outcome.expansion_id,
                "status": outcome.status,
                "reason": outcome.message,
            }
            context["ti"].xcom_push(key="joined", value=joined)
            raise AirflowSkipException(outcome.message)
        return outcome.to_xcom()

    def _wait_for(self, context: Any, holder: str, exc: LeaseHeldError) -> Any:
        self.log.info(
            "The expansion of job %s is owned by %s: waiting for it (%s) - %s",
            self.job_name,
            exc.lease.holder,
            self._where,
            exc,
        )
        trigger = ExpansionLeaseTrigger(
            job_name=self.job_name,
            holder=holder,
            joined_holder=exc.lease.holder,
            poll_interval_s=self.poll_interval_s,
            coordinator=self.coordinator,
            kafka_config_id=self.kafka_config_id,
            request_timeout_s=self.request_timeout_s,
        )
        return self._wait(context, trigger, "execute_complete")

    def _wait_for_job(self, context: Any, exc: JobDownError) -> Any:
        """The job is down and this DAG never launches it: wait for it to come back (nothing
        was changed)."""
        self.log.warning("%s - waiting up to %.0f s for it to come back (%s).",
                         exc, float(self.job_down_timeout_s), self._where)  # fmt: skip
        trigger = JobBackTrigger(
            job_name=self.job_name,
            deadline=time.time() + float(self.job_down_timeout_s),
            poll_interval_s=self.poll_interval_s,
            coordinator=self.coordinator,
            kafka_config_id=self.kafka_config_id,
            request_timeout_s=self.request_timeout_s,
        )
        return self._wait(context, trigger, "execute_job_back")

    @property
    def _where(self) -> str:
        return "deferred" if self.deferrable else "in the worker"

    def _wait(self, context: Any, trigger: PollingTrigger, method: str) -> Any:
        """Defer to `trigger`, or (not deferrable) loop its poll here; either way `method`
        resumes with the event the trigger fires."""
        if self.deferrable:
            self.defer(trigger=trigger, method_name=method)
        try:
            return getattr(self, method)(context, self._poll_until_event(trigger))
        finally:
            self.close_clients()

    def _poll_until_event(self, trigger: PollingTrigger) -> dict[str, Any]:
        """The trigger's own loop, run in the worker: the event it would fire deferred (one
        implementation of the wait, its pacing, reconnects and refusals)."""
        return wait_in_worker(trigger)

    def execute_job_back(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        """The wait for the job ended: back (decide again) or still down (fail, unchanged)."""
        if event.get("status") == "running":
            self.log.info("Job %s is back (%s): deciding again.", self.job_name,
                          ", ".join(event.get("live") or []))  # fmt: skip
            return self.execute(context)
        if event.get("status") == "timeout":
            raise AirflowFailException(
                "JobDownError: "
                + job_down_refusal(self.job_name, event, float(self.job_down_timeout_s))
            )
        raise AirflowFailException(event.get("error") or f"the wait for the job ended: {event}")

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        """The lease is free: decide again, on the expansion of the holder this run joined."""
        self.log.info(
            "The expansion lease is free (held by %s before): deciding again.", event.get("holder")
        )
        return self.execute(context, joined_holder=event.get("holder"))
