"""In place (docs/design.md 'The switch in place'): the running processor reads vN+1 from a
micro-batch boundary itself (the provider's reader), gating each child partition by its parent's
snapshot: plan -> expand -> grace and snapshot -> write vN+1 -> ack (running on vN+1) -> report. The
barrier does not wait for the job to drain; nothing stops, nothing is launched. Its job side (the
reader's switch in the running processor) is `spark._in_place`."""

from __future__ import annotations

from airflow_samza_expand._protocol.restart.strategy import RestartStrategy
from airflow_samza_expand.core._liveness import CAPABILITY_IN_PLACE

STRATEGY = RestartStrategy(
    mode="in-place",
    summary="the running job switches to the new job model at a batch boundary: no restart",
    launches_standby=False,
    stops_job=False,
    submits_job=False,
    waits_for_drain=False,
    capability=CAPABILITY_IN_PLACE,
    fits_reason="every live processor of v{version} ({who}) can switch in place",
    refusal=(
        "restart='in-place' needs a job that can switch to a new job model while it runs, "
        "but processor(s) {unable} of v{version} do not advertise the 'in-place' capability in "
        "their heartbeat (Spark's own Kafka source cannot change assign in a running "
        "query) - use restart='auto', 'in-app', 'warm' or 'cold', or read with "
        "Job.read_kafka(source='python')"
    ),
    idle="the running job takes job model v{version} at a batch boundary itself",
    acknowledged_by="the running processor, switching in place: nothing was launched",
)
