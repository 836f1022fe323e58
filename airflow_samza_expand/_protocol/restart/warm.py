"""Warm (docs/design.md 'The warm restart'): the vN+1 processor is launched as a standby during the
producer grace while vN still runs, takes the job's active lease once vN released it after its last
committed batch, and starts on vN+1 (it never processes an older job model). The submit step
launches nothing while a live processor of vN+1 exists; the ack waits until it is active."""

from __future__ import annotations

from airflow_samza_expand._protocol.restart.strategy import RestartStrategy
from airflow_samza_expand.core._liveness import CAPABILITY_STANDBY

STRATEGY = RestartStrategy(
    mode="warm",
    summary=(
        "start the new job model's processor as a standby before the old one stops: the job "
        "is down for the switch only"
    ),
    launches_standby=True,
    stops_job=True,
    submits_job=True,
    waits_for_drain=True,
    capability=CAPABILITY_STANDBY,
    fits_reason="every live processor of v{version} ({who}) can be a standby",
    refusal=(
        "restart='warm' needs a job that can wait as a standby, but processor(s) {unable} of "
        "v{version} do not advertise the 'standby' capability in their heartbeat: "
        "launching a second instance would run the job twice - use restart='auto' or "
        "'cold', or build the job on airflow_samza_expand.spark.runtime"
    ),
    acknowledged_by="the standby launched during the grace, taking the active lease",
)
