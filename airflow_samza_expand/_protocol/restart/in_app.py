"""In-app (docs/design.md 'The in-app restart'): the running application restarts its *query* on
vN+1 once the barrier has passed - same application, same lease, same processor, same checkpoint
(the old partitions go on from their offsets, the new ones start at their log start). For a job on
the runtime that hands ``job.run`` the function starting its query and reads with Spark's own Kafka
source. The barrier waits for the drain (Spark's source cannot gate a child by its parent); nothing
stops, nothing is launched: the DAG coordinates through the store only. Its job side (the query's
restart in the running application) is `spark._in_app`."""

from __future__ import annotations

from airflow_samza_expand._protocol.restart.strategy import RestartStrategy
from airflow_samza_expand.core._liveness import CAPABILITY_IN_APP

STRATEGY = RestartStrategy(
    mode="in-app",
    summary="the running application restarts its own query on the new job model",
    launches_standby=False,
    stops_job=False,
    submits_job=False,
    waits_for_drain=True,
    capability=CAPABILITY_IN_APP,
    fits_reason="every live processor of v{version} ({who}) can restart its query in-app",
    refusal=(
        "restart='in-app' needs a job that restarts its own query on a new job model, but "
        "processor(s) {unable} of v{version} do not advertise the 'in-app' capability in their "
        "heartbeat - hand job.run the function that starts the query "
        "(job.run(start)) instead of the started query, or use restart='auto', 'warm' or "
        "'cold'"
    ),
    idle=(
        "the running application restarts its query on job model v{version} itself once the "
        "barrier has passed"
    ),
    acknowledged_by="the running application, restarting its query on it: nothing was launched",
)
