"""The cluster fault matrix, run by `fault_matrix.py --cluster`. The same real job,
factory DAG and live keyed traffic as the fault matrix, on a three-node Apache Kafka cluster
(`_testing.apache_kafka_cluster`: replication 3, ``min.insync.replicas=2``), in the default
restart (in place) and in warm. A broker is hurt in the middle of a step:

* ``leader-barrier``: the leader of the grown topic's partition 0 SIGKILLed during the barrier;
* ``coordinator-write``: the coordinator topic's leader SIGKILLed while the write of job model
  v2 is held midway (it then goes on against the new leader);
* ``coordinator-lease``: the coordinator topic's leader SIGKILLed during the barrier's grace,
  while the run renews its lease;
* ``broker-after-expand``: the leader of a new partition (2) SIGKILLed right after the
  expansion, while the new partitions' leaders settle;
* ``broker-restart-switch``: a broker (the leader of partition 0) stopped and started while
  the job switches (in place: the write; warm: the stop);
* ``rolling-restart``: every broker in turn stopped and started (controlled shutdown, then
  caught up) during one expansion, in a background thread while the run goes on.

``cluster/in-app/...``: ``leader-barrier``, ``coordinator-write`` and ``rolling-restart`` with
the supervised example user job restarting its query in its driver (`_fault_matrix_inapp`).

``cluster/outage/<strategy>/<when>-<length>``: all three nodes down at once for 30 s or
3 minutes while the job runs or during an expansion, in place and in-app - the fault matrix's
broker outages (`_fault_matrix_outage`), run on the cluster.

A killed node is started again after the run. Each case passes as the fault matrix's do: the
run ends green (the tasks retry), the expansion completed once, exact counts, per-key order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from _fault_matrix_outage import outage_case, outage_cases
from fault_matrix import Case, Context, Job, Outcome, job_for, mid_step

STRATEGIES = ("in-place", "warm")
# the supervised example user job restarting its query in its driver (_fault_matrix_inapp)
IN_APP = ("leader-barrier", "coordinator-write", "rolling-restart")
# where each fault lands: (the step the run must have begun, the step held midway or None)
WHEN = {
    "leader-barrier": ("barrier-grace", None),
    "coordinator-write": ("write", "write"),
    "coordinator-lease": ("barrier-grace", None),
    "broker-after-expand": ("barrier-grace", None),
    "broker-restart-switch": ("switch", "switch"),
    "rolling-restart": ("barrier-grace", None),
}
SWITCH_STEP = {"in-place": "write", "warm": "stop"}
# the cluster's faults take seconds (a node fenced after 6 s, a restart ~10 s): a longer grace
# keeps the barrier's grace open across them, and the tasks retry transient errors
OVERRIDES = {"retries": 3, "barrier": {"producer_refresh_grace_s": 8.0}}


def hurt(case: Case, job: Job, cluster: Any) -> Callable[[], None] | None:
    """Do the case's fault on the cluster; returns a call that waits for a background fault
    (the rolling restart) to end, or None."""
    topic, coordinator = job.s.topic, job.s.store.topic
    step = case.step
    if step == "leader-barrier":
        cluster.kill(cluster.leader(topic, 0))
    elif step in ("coordinator-write", "coordinator-lease"):
        cluster.kill(cluster.leader(coordinator, 0))
    elif step == "broker-after-expand":
        cluster.kill(cluster.leader(topic, 2))
    elif step == "broker-restart-switch":
        cluster.restart_node(cluster.leader(topic, 0), in_sync=False)
    elif step == "rolling-restart":
        rolling = threading.Thread(target=cluster.restart, name="rolling-restart", daemon=True)
        rolling.start()
        return lambda: rolling.join(600)
    else:
        raise ValueError(f"no cluster fault {step!r}")
    return None


def heal(cluster: Any) -> None:
    """Start every node a case stopped; wait until every replica is back in sync."""
    stopped = sorted(set(cluster.nodes) - set(cluster.running_ids()))
    for node_id in stopped:
        cluster.start_node(node_id)
    cluster.wait_in_sync()


def cluster_case(ctx: Context, case: Case) -> Outcome:
    cluster = ctx.kafka
    job = job_for(ctx, case, overrides=OVERRIDES).start()
    try:
        begun, held = (SWITCH_STEP[case.strategy] if s == "switch" else s for s in WHEN[case.step])
        run = job.run(hold_at=held)
        job.wait_step(run, begun)
        ctx.log(f"  [{case.name}] {begun} began; hurting the cluster")
        waiting = hurt(case, job, cluster)
        midway = mid_step(job.record(), begun)  # the fault landed inside the step
        ctx.log(f"  [{case.name}] {case.step} done; {begun} midway: {midway}; nodes running "
                f"{cluster.running_ids()}")  # fmt: skip
        run.unhold.touch()
        result = run.result()
        if waiting is not None:
            waiting()
        out = job.outcome(result, case.strategy, max_extra=0)
        out.mid_step = midway
        return out
    finally:
        job.close()
        heal(cluster)


def cluster_outage_case(ctx: Context, case: Case) -> Outcome:
    """The fault matrix's broker outage (`_fault_matrix_outage.outage_case`) with every node of
    the cluster down at once; each node started again (and in sync) after the case."""
    try:
        return outage_case(ctx, case)
    finally:
        heal(ctx.kafka)


def cluster_cases() -> list[Case]:
    cases = [
        Case(f"cluster/{strategy}/{step}", "cluster", step, strategy, cluster_case)
        for strategy in STRATEGIES
        for step in WHEN
    ]
    cases += [
        Case(f"cluster/in-app/{step}", "cluster", step, "in-app", cluster_case) for step in IN_APP
    ]
    return cases + outage_cases("cluster/outage", cluster_outage_case)


def start_cluster(work: Any) -> Any:
    from airflow_samza_expand._testing.apache_kafka_cluster import ApacheKafkaCluster

    return ApacheKafkaCluster(work_dir=work / "kafka-cluster", log_level="WARN").start()
