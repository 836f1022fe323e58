"""A wait logs one line per change of what it waits for, not one per poll."""

import logging

from airflow_samza_expand.airflow._waitlog import WaitLog


def test_a_wait_logs_each_change_once(caplog):
    caplog.set_level("INFO", logger="waits")
    waits = WaitLog(logging.getLogger("waits"))
    for message in ["waiting for p1", "waiting for p1", "waiting for p1", "waiting for p2"]:
        waits.info(message, " (0.5 s)")
    assert [r.getMessage() for r in caplog.records] == [
        "waiting for p1 (0.5 s)",
        "waiting for p2 (0.5 s)",
    ]
