"""Cold: stop vN, write vN+1, then start vN+1 with spark-submit (down for a whole Spark start).
The last resort: it never runs two instances, whatever the job can do."""

from __future__ import annotations

from airflow_samza_expand._protocol.restart.strategy import Context, RestartStrategy


class _Cold(RestartStrategy):
    def reason(self, ctx: Context, unable: object = ()) -> str:
        if not ctx.live:
            return f"no live processor of v{ctx.version}: nothing to hand over from"
        cannot = ctx.unable("standby")
        return (
            f"processor(s) {', '.join(cannot)} of v{ctx.version} do not advertise the 'standby' "
            "capability: a cold restart (stop, write, start) never runs two instances"
        )


STRATEGY = _Cold(
    mode="cold",
    summary="stop, then start: down for a whole Spark start",
    launches_standby=False,
    stops_job=True,
    submits_job=True,
    waits_for_drain=True,
    needs_live=False,
    acknowledged_by="the processor the submit step launched",
)
