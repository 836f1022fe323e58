"""End to end: a plain stateful PySpark job moves onto the runtime with its state and position
by keeping its checkpoint, then is expanded 2 -> 4 -> 8 in its own application.

1. ``examples/plain_job.py`` (Spark's own Kafka source with ``subscribe``, its own checkpoint,
   the example user job's keyed counts) runs some micro-batches under live keyed traffic and
   is stopped (SIGTERM, as a deployment stops it: a batch may be in flight);
2. ``init-job --from-checkpoint`` writes job model v1 and puts the checkpoint's last committed
   position into the job's group;
3. ``examples/user_job.py`` - the same logic on ``job.read_kafka()`` + ``job.run(start)`` -
   starts on the SAME checkpoint: the runtime's start checks pass it, Spark restores every
   key's state and every partition's offset;
4. the expansion DAG (default restart ``auto``) grows the topic 2 -> 4 -> 8: ``in-app`` both
   times, one processor and one Spark application from the start on the runtime to the end.

The verifier over the whole output history (the plain job's outputs, then the runtime's):
every key's count goes on from where the plain job left it (never back: no reset), none twice
and none skipped (each key's sequence checked, its final count exact), in order (proven)."""

from __future__ import annotations

from pathlib import Path

import pytest
import test_e2e_user_job as user_job_e2e
from test_e2e_user_job import CHAIN_OK, USER_JOB

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.timeout(1500)]

PLAIN_JOB = str(Path(USER_JOB).with_name("plain_job.py"))
PLAIN_BATCHES = 3  # committed micro-batches of the plain job before it is stopped


def test_a_plain_job_keeps_its_checkpoint_on_the_runtime_then_expands_in_app(scenario) -> None:
    from airflow_samza_expand._demo.jobs import StreamJob, committed_total, wait_for
    from airflow_samza_expand._demo.scenario_config import application_conf
    from airflow_samza_expand._demo.verify import read_output_history
    from airflow_samza_expand._protocol.cli.init_job import init_job
    from airflow_samza_expand._protocol.job.spark_checkpoint import read_checkpoint
    from airflow_samza_expand._protocol.records import expansion_id_for

    s = scenario(application=USER_JOB, application_args=("--source", "kafka"), restart="auto")
    s.start_producer()
    plain = StreamJob(f"{s.job_name}-plain", [
        "--bootstrap-servers", s.cfg.bootstrap, "--topic", s.topic, "--checkpoint-dir",
        s.checkpoint, "--output-topic", s.output_topic, "--shuffle-partitions", "2",
    ], s.log_dir, application=PLAIN_JOB, conf=application_conf(s.cfg))  # fmt: skip
    plain.launch()
    try:
        wait_for(f"the plain job's {PLAIN_BATCHES} committed batches",
                 lambda: _committed_batches(s.checkpoint) >= PLAIN_BATCHES,
                 timeout_s=300, log=s.log)  # fmt: skip
    finally:
        plain.terminate()
    counted = {k: v[-1]["count"] for k, v in read_output_history(s.config, s.output_topic).items()}
    assert counted and sum(counted.values()) > 0  # the state the runtime must go on from
    moved = init_job(s.config, s.job_name, [s.topic], coordinator="kafka",
                     from_checkpoint=s.checkpoint, quiet_s=1.0)  # fmt: skip
    assert moved.model.partition_counts() == {s.topic: 2} and moved.position
    adopted = committed_total(s.admin, s.job_name, s.topic)
    assert adopted == sum(read_checkpoint(s.checkpoint).kafka_position()[s.topic].values())
    s.log(f"plain job stopped: {len(counted)} keys counted, position {moved.position}")

    s.start_job()  # the runtime job on the SAME checkpoint
    wait_for("the runtime's first committed batch past the adopted position",
             lambda: committed_total(s.admin, s.job_name, s.topic) > adopted,
             timeout_s=300, log=s.log)  # fmt: skip
    first = dict(s.job.handle)
    for after in (4, 8):
        outcome = s.expand()
        assert outcome.counts == (after // 2, after), outcome.counts
        print(f"[e2e] adopted job {outcome.counts}: {outcome.state} {outcome.tasks}")
        assert outcome.state == "success", outcome.tasks
        assert {t for t, st in outcome.tasks.items() if st == "success"} >= CHAIN_OK
        assert outcome.summary["order"]["order"] == "proven", outcome.summary["order"]["line"]
        record = s.store.get_expansion(
            expansion_id_for(s.job_name, {s.topic: after // 2}, {s.topic: after})
        )
        choice = (record.results.get("plan") or {}).get("restart") or {}
        assert (choice.get("requested"), choice.get("mode"), outcome.restart) == (
            "auto", "in-app", "in-app"), choice  # fmt: skip
    _one_processor_and_one_application(s, first)
    text = Path(first["log_path"]).read_text(errors="replace")  # it went on, no fresh start
    assert "a fresh checkpoint starts" not in text, "the runtime took the kept checkpoint as new"
    result = s.finish(expected_versions=[1, 2, 3])
    print(f"[e2e] adopted job: {result.describe()}")
    # ok: every key's final count exact, no sequence violation, no count ever went back
    assert result.ok and result.records_counted == result.records_produced > 0, result.describe()
    assert set(range(2, 8)) <= set(result.partitions_consumed)


def _one_processor_and_one_application(s, first: dict) -> None:
    """test_e2e_user_job's in-app checks: the job launched at the start runs v3, nothing was
    launched or stopped, one Spark application restarted its query on v2 and v3 (its helper
    is being split in two; either form)."""
    if hasattr(user_job_e2e, "_nothing_launched"):
        user_job_e2e._nothing_launched(s, first)
        user_job_e2e._one_application_restarting_its_query(s, first)
    else:
        user_job_e2e._one_processor_and_one_application(s, first)


def _committed_batches(checkpoint: str) -> int:
    """How many micro-batches the checkpoint has committed (0 before the first)."""
    from airflow_samza_expand._protocol.job.spark_checkpoint import CheckpointError, read_checkpoint

    try:
        last = read_checkpoint(checkpoint).last_committed_batch
    except CheckpointError:  # no offset log yet
        return 0
    return 0 if last is None else last + 1
