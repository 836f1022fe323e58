"""End to end with a job of the user's own (`examples/user_job.py` on `spark.runtime`, handing
``job.run`` the function that starts its query): state in ``applyInPandasWithState`` keyed by
the record key, expanded 2 -> 4 -> 8 by the expansion DAG under live keyed traffic, with the DAG
factory's default restart (``auto``; the test does not choose one).

docs/design.md 'How a restart is chosen': the choice the plan records (``results.plan.restart``)
is the first strategy every live processor of vN advertises in its heartbeat, and each source
gets its own:

* the provider's reader (``--source python``) advertises ``in-place``: the running job switches
  to the new job model at a batch boundary (docs/own-job.md 'Which restart your job gets') -
  the same driver process, nothing launched;
* Spark's own Kafka source cannot switch in place; the runtime advertises ``in-app``, so the
  running application restarts its query on each new job model once the barrier has passed
  (the same section) - exactly that: one processor id and one Spark application from start to
  end, no spark-submit launched by the DAG, no stop record. A fall back to a ``warm`` handover
  (a spark-submit from Airflow per expansion) fails it. That case runs in
  test_e2e_two_streams.py (``user-join-in-app``, with this file's checks): a user's job on
  Spark's own source joining two streams - one run of the slow scenario for both.

What a job whose processors do not advertise ``in-app`` gets instead (the warm handover's
standby, stop and submit) is held without Spark in tests/protocol/test_protocol_restart.py;
the warm handover itself stays covered by the other e2e tests (the scenario's default). The
verifier: exact per-key counts, no
sequence violation, no count ever went back, partitions 2..7 consumed, job model history
v1..v3, order proven."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.timeout(1500)]

USER_JOB = str(Path(__file__).resolve().parents[2] / "airflow_samza_expand/examples/user_job.py")
CHAIN_OK = {"plan", "expand", "barrier", "stop_job", "write_job_model", "submit", "ack", "report"}
APPLICATION = re.compile(r"in (?:the same )?Spark application (\S+)")
# the order `auto` tries: (restart mode, the capability every live processor of vN must advertise)
PREFERENCE = (("in-place", "in-place"), ("in-app", "in-app"), ("warm", "standby"))
# the reader switches in place; Spark's own source cannot, its runtime restarts the query
EXPECTED = {"python": "in-place", "kafka": "in-app"}


def factory_default_restart() -> str:
    """The expansion DAG factory's own default restart (what a DAG without restart= gets)."""
    from airflow_samza_expand.dags import RestartSettings

    (field,) = [f for f in dataclasses.fields(RestartSettings) if f.name == "restart"]
    return str(field.default)


def expected_mode(capabilities: list[tuple[str, ...]]) -> str:
    """docs/design.md 'How a restart is chosen' over the live processors' capabilities."""
    for mode, capability in PREFERENCE:
        if capabilities and all(capability in c for c in capabilities):
            return mode
    return "cold"


# "kafka" (in-app) runs in test_e2e_two_streams.py, "user-join-in-app"
@pytest.mark.parametrize("source", ["python"])
def test_user_job_expanded_twice_with_the_default_restart(scenario, source) -> None:
    from airflow_samza_expand._protocol.records import expansion_id_for
    from airflow_samza_expand.core._liveness import statuses

    default = factory_default_restart()
    assert default == "auto", default
    s = scenario(application=USER_JOB, application_args=("--source", source), restart=default)
    s.start_producer()
    s.start_job()
    first = dict(s.job.handle)
    for version in (2, 3):
        live = [p for p in statuses(s.store.processors()).values()
                if p.job_model_version == version - 1 and p.state == "running"]  # fmt: skip
        assert live, s.store.processors()
        pid = int(s.job.handle["pid"])
        outcome = s.expand()
        print(f"[e2e] user job ({source}) {outcome.counts}: {outcome.state} {outcome.tasks}")
        assert outcome.state == "success", outcome.tasks
        assert {t for t, st in outcome.tasks.items() if st == "success"} >= CHAIN_OK
        assert outcome.summary["order"]["order"] == "proven", outcome.summary["order"]["line"]
        record = s.store.get_expansion(
            expansion_id_for(s.job_name, {s.topic: outcome.counts[0]},
                             {s.topic: outcome.counts[1]})
        )  # fmt: skip
        choice = (record.results.get("plan") or {}).get("restart") or {}
        print(f"[e2e] user job ({source}) v{version}: restart {choice}; processors of "
              f"v{version - 1}: {[(p.processor_id, p.capabilities) for p in live]}")  # fmt: skip
        # the record's choice: what the default asked for, and `auto` over the processors
        assert choice.get("requested") == "auto", choice
        assert choice.get("mode") == expected_mode([p.capabilities for p in live]), (choice, live)
        assert choice["mode"] == EXPECTED[source], (choice, live)
        assert outcome.restart == choice["mode"], (outcome.restart, choice)
        # the same driver runs on: nothing launched, nothing stopped
        assert int(s.job.handle["pid"]) == pid, s.job.handle
        assert "pid" not in (outcome.summary["submit"] or {}), outcome.summary["submit"]
        assert not outcome.standby_took_over, outcome
        running = [p for p in statuses(s.store.processors()).values() if p.state == "running"]
        assert [p.job_model_version for p in running] == [version], running
    _nothing_launched(s, first)  # before the scenario's own stop at its finish
    if source == "kafka":
        _one_application_restarting_its_query(s, first)
    result = s.finish(expected_versions=[1, 2, 3])
    print(f"[e2e] user job ({source}): {result.describe()}")
    assert result.ok, result.describe()
    assert result.records_produced > 0 and result.records_counted == result.records_produced
    assert not result.count_resets and not result.order_violations
    assert set(range(2, 8)) <= set(result.partitions_consumed)
    assert s.models[-1].partition_counts() == {s.topic: 8}
    assert s.models[-1].tasks() == ["Partition 0", "Partition 1"]


def _nothing_launched(s, first: dict) -> None:
    """The job launched at the start runs v3 now: the same process and its one processor; the
    DAG launched nothing (no spark-submit log, no stop record)."""
    assert s.job.handle["pid"] == first["pid"], (first, s.job.handle)
    launched = sorted(p.name for p in Path(s.log_dir).rglob("spark-submit-*.log"))
    assert not launched, launched
    assert s.store.stop_request() is None
    (pid,) = s.store.processors()
    status = s.store.processors()[pid]
    assert (status["job_model_version"], status["state"]) == (3, "running"), status


def _one_application_restarting_its_query(s, first: dict) -> None:
    """In-app: one Spark application from start to end, its query restarted on v2 and v3."""
    (status,) = s.store.processors().values()
    assert "in-app" in status["capabilities"], status
    text = Path(first["log_path"]).read_text(errors="replace")
    assert set(APPLICATION.findall(text)) and len(set(APPLICATION.findall(text))) == 1, (
        APPLICATION.findall(text)
    )
    for version in (2, 3):
        assert f"restarted its query on job model v{version}" in text
