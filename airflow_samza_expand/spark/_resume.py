"""A processor fenced by a lost lease - Kafka unreachable for longer than the lease's TTL, or
a pause - waits as a standby for the lease again (`spark._driving.QueryDriver.resume`), unless
another processor is active: docs/operations.md, "A broker outage"."""

from __future__ import annotations

import logging
import time

from airflow_samza_expand.core._liveness import ROLE_ACTIVE, ROLE_STANDBY, statuses
from airflow_samza_expand.spark._lifecycle import (
    STORE_UNAVAILABLE,
    VERSION_POLL_S,
    Lifecycle,
    heartbeat_interval,
)

log = logging.getLogger("airflow_samza_expand.spark._lifecycle")


def other_actives(life: Lifecycle) -> list[str]:
    """Live processors of this job other than this one that heartbeat as the active."""
    with life.store_lock:
        found = statuses(life.store.processors())
    return sorted(
        pid
        for pid, s in found.items()
        if pid != life.processor_id
        and s.role == ROLE_ACTIVE
        and s.state in ("starting", "running", "stopping")
        and s.alive()
    )


def wait_for_lease_again(life: Lifecycle) -> str:
    """Fenced - the lease expired, e.g. Kafka unreachable for longer than the TTL: wait as a
    standby (heartbeating ``standby`` when the store can be written) until this processor
    holds the lease again (``"regained"``, the new epoch taken), another processor is
    active (``"replaced"``) or a stop for its version is requested (``"stopped"``)."""
    assert life.lease is not None
    interval = heartbeat_interval(life.ttl_s)
    next_beat = 0.0
    while True:
        # held again, as the broker confirms: a zombie whose member still thinks it holds
        # the partition is refused here and never starts its query beside the active
        lease = life.lease
        if lease.wait_until_active(timeout_s=VERSION_POLL_S * 2) and lease.confirm(lease.epoch):
            life.epoch = lease.epoch
            log.info("processor %s holds the lease of job %s again (epoch %d)",
                     life.processor_id, life.job_name, life.epoch)  # fmt: skip
            return "regained"
        try:
            if life.check_stop():
                return "stopped"
            others = other_actives(life)
            if time.monotonic() >= next_beat:
                life.heartbeat("standby", ROLE_STANDBY)
                next_beat = time.monotonic() + interval
        except STORE_UNAVAILABLE as exc:
            log.info("fenced, Kafka still unreachable: %s", exc)
            continue
        if others:
            log.warning("processor %s: %s holds the lease of job %s now",
                        life.processor_id, ", ".join(others), life.job_name)  # fmt: skip
            return "replaced"


__all__ = ["other_actives", "wait_for_lease_again"]
