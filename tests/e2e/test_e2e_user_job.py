"""End to end with a job of the user's own (`examples/user_job.py` on `spark.runtime`, handing
``job.run`` the function that starts its query): state in ``applyInPandasWithState`` keyed by
the record key, expanded 2 -> 4 -> 8 by the expansion DAG under live keyed traffic.

* Spark's own Kafka source with the default restart (``auto``): the processor advertises
  ``in-app``, so the running application restarts its query on each new job model once the
  barrier has passed (rule 1.10) - one processor id and one Spark application from start to end,
  no spark-submit launched by the DAG.
* The provider's reader with ``handover="warm"``: the warm handover to a standby the DAG
  launches (rule 1.7), kept covered with a job of the user's own.

The verifier: exact per-key counts, no sequence violation, no count ever went back, partitions
2..7 consumed, job model history v1..v3, order proven."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.timeout(1500)]

USER_JOB = str(Path(__file__).resolve().parents[2] / "airflow_samza_expand/examples/user_job.py")
CHAIN_OK = {"plan", "expand", "barrier", "stop_job", "write_job_model", "submit", "ack", "report"}
APPLICATION = re.compile(r"in (?:the same )?Spark application (\S+)")


@pytest.mark.parametrize(("source", "handover"), [("kafka", "auto"), ("python", "warm")])
def test_user_job_expanded_twice(scenario, source, handover) -> None:
    s = scenario(application=USER_JOB, application_args=("--source", source), handover=handover)
    s.start_producer()
    s.start_job()
    first = dict(s.job.handle)
    outcomes = [s.expand() for _ in range(2)]
    for outcome in outcomes:
        print(f"[e2e] user job ({source}) {outcome.counts}: {outcome.state} {outcome.tasks}")
        assert outcome.state == "success", outcome.tasks
        assert {t for t, st in outcome.tasks.items() if st == "success"} >= CHAIN_OK
        assert outcome.summary["order"]["order"] == "proven", outcome.summary["order"]["line"]
    if handover == "auto":
        # rule 1.10: Spark's own source and job.run(start): the query restarts in-app
        assert [o.restart for o in outcomes] == ["in-app", "in-app"], outcomes
        _one_processor_and_one_application(s, first)
    else:
        assert [o.handover for o in outcomes] == [True, True], outcomes
    result = s.finish(expected_versions=[1, 2, 3])
    print(f"[e2e] user job ({source}): {result.describe()}")
    assert result.ok, result.describe()
    assert result.records_produced > 0 and result.records_counted == result.records_produced
    assert not result.count_resets and not result.order_violations
    assert set(range(2, 8)) <= set(result.partitions_consumed)
    assert s.models[-1].partition_counts() == {s.topic: 8}
    assert s.models[-1].tasks() == ["Partition 0", "Partition 1"]
    if handover == "auto":
        assert len(s.store.processors()) == 1, s.store.processors()  # no other ever heartbeat


def _one_processor_and_one_application(s, first: dict) -> None:
    """The job launched at the start runs v3 now: the same process, processor and Spark
    application; the DAG launched nothing (no spark-submit log, no stop record)."""
    assert s.job.handle["pid"] == first["pid"], (first, s.job.handle)
    launched = sorted(p.name for p in Path(s.log_dir).rglob("spark-submit-*.log"))
    assert not launched, launched
    assert s.store.stop_request() is None
    (pid,) = s.store.processors()
    status = s.store.processors()[pid]
    assert (status["job_model_version"], status["state"]) == (3, "running"), status
    assert "in-app" in status["capabilities"], status
    text = Path(first["log_path"]).read_text(errors="replace")
    assert set(APPLICATION.findall(text)) and len(set(APPLICATION.findall(text))) == 1, (
        APPLICATION.findall(text)
    )
    for version in (2, 3):
        assert f"restarted its query on job model v{version}" in text
