"""A topic grown outside Airflow, end to end (real Spark `local[2]`, the test Kafka, Airflow's
`dag.test()`):

1. the stateful job runs on job model v1 (2 partitions) under a live keyed producer; the topic
   is grown 2 -> 4 with a plain CreatePartitions, and producers put moved keys into the new
   partitions;
2. while v1 is active it keeps processing the old partitions and gives the new ones no reads,
   commits or outputs (README: "The running job reads only the partitions of its job model");
3. the event-driven example DAG (dags/samza_expand_on_partition_change.py) finishes the
   expansion: its asset watcher's trigger (`PartitionCountChangeTrigger`, run as the triggerer
   runs it: rebuilt from its serialized form, in its own event loop, baseline 2) fires, then
   the DAG runs with `dag.test()`; afterwards v2 is active with the SEP-5 mapping and every
   key's count is exact.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import threading
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.timeout(1500)]

REPO = Path(__file__).resolve().parents[2]
EVENT_DAG = REPO / "dags" / "samza_expand_on_partition_change.py"


def old_partition_seqs(config: dict, topic: str, highs: dict[int, int]) -> dict[str, set[int]]:
    """key -> the seqs of its records in partitions 0 and 1 below ``highs``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**config, "group.id": f"reader-{uuid.uuid4().hex[:8]}"})
    seqs: dict[str, set[int]] = {}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
        left = {p: n for p, n in highs.items() if n > 0}
        while left:
            for msg in consumer.consume(500, 5.0):
                if msg.error() is not None or msg.offset() >= highs[msg.partition()]:
                    continue
                doc = json.loads(msg.value())
                seqs.setdefault(doc["key"], set()).add(int(doc["seq"]))
                if msg.offset() + 1 >= highs[msg.partition()]:
                    left.pop(msg.partition(), None)
        return seqs
    finally:
        consumer.close()


class TriggerThread(threading.Thread):
    """Runs ``trigger.run()`` in its own event loop (as the triggerer does) until its first
    event."""

    def __init__(self, trigger) -> None:
        super().__init__(daemon=True)
        self.trigger = trigger
        self.event = None
        self.fired = threading.Event()

    def run(self) -> None:
        async def first() -> None:
            agen = self.trigger.run()
            try:
                self.event = await agen.__anext__()
            finally:
                await agen.aclose()
            self.fired.set()

        asyncio.run(first())


def test_growth_outside_airflow_waits_for_v2_then_the_event_driven_dag_finishes_it(
    scenario, tmp_path, monkeypatch
) -> None:
    import airflow_env

    from airflow_samza_expand._demo.jobs import committed_total, wait_for
    from airflow_samza_expand._demo.verify import read_output_history
    from airflow_samza_expand._protocol.job import launch as detached

    s = scenario()
    s.start_producer()
    s.start_job()
    admin, topic, job = s.admin, s.topic, s.job_name

    # the example DAG, configured by its environment variables, and its watcher's trigger
    root = tmp_path / "checkpoints"
    root.mkdir()
    (root / job).symlink_to(s.checkpoint)  # the DAG's restarted job resumes v1's checkpoint
    for name, value in {
        "SAMZA_EXPAND_WATCH_TOPIC": topic,
        "SAMZA_EXPAND_JOB_NAME": job,
        "SAMZA_EXPAND_GRACE_SECONDS": str(s.cfg.grace_s),
        "SAMZA_EXPAND_BOOTSTRAP_SERVERS": s.cfg.bootstrap,
        "SAMZA_EXPAND_CHECKPOINT_ROOT": str(root),
        "SAMZA_EXPAND_OUTPUT_TOPIC": s.output_topic,
        "SAMZA_EXPAND_RUN_MODE": "continuous",
    }.items():
        monkeypatch.setenv(name, value)
    spec = importlib.util.spec_from_file_location(f"event_dag_{uuid.uuid4().hex[:6]}", EVENT_DAG)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (watcher,) = module.topic_partitions.watchers
    classpath, kwargs = watcher.trigger.serialize()
    trigger_cls = getattr(
        importlib.import_module(classpath.rsplit(".", 1)[0]), classpath.rsplit(".", 1)[1]
    )
    # the triggerer has watched since before the growth: baseline 2; a 1 s poll, not 30 s
    watching = TriggerThread(trigger_cls(**{**kwargs, "poll_interval_s": 1.0, "baseline": 2}))
    watching.start()

    # 1. grow outside Airflow; wait until producers wrote moved keys into the new partitions
    committed_before = committed_total(admin, job, topic)
    admin.create_partitions(topic, 4)
    wait_for("records in the new partitions", lambda: new_partitions_written(admin, topic),
             timeout_s=120, log=s.log)  # fmt: skip
    highs_new = admin.high_watermarks({topic: [2, 3]})[topic]
    # 2. v1 keeps processing the old partitions: several more commits after the new records
    wait_for(
        "v1 to commit more of the old partitions",
        lambda: committed_total(admin, job, topic) > committed_before + 200,
        timeout_s=300,
        log=s.log,
    )
    s.producer.pause()
    wait_for("v1 to process the old partitions", lambda: caught_up_old(admin, job, topic),
             timeout_s=300, log=s.log)  # fmt: skip
    assert [m.version for m in s.store.job_model_history()] == [1]
    committed = admin.group_offsets(job, {topic: [0, 1, 2, 3]})[topic]
    assert committed[2] is None and committed[3] is None, committed  # no commits
    highs_old = admin.high_watermarks({topic: [0, 1]})[topic]
    in_old = old_partition_seqs(s.config, topic, highs_old)

    def counted_old_records() -> dict | None:  # outputs follow the commit of their batch
        outputs = read_output_history(s.config, s.output_topic)
        done = all(outputs.get(k) and outputs[k][-1]["count"] >= len(v) for k, v in in_old.items())
        return outputs if done else None

    outputs = wait_for("v1's outputs of the old partitions", counted_old_records, timeout_s=120,
                       log=s.log)  # fmt: skip
    assert set(outputs) == set(in_old)
    for key, outs in outputs.items():  # every output counts records of the old partitions only
        assert outs[-1]["last_seq"] in in_old[key], (key, outs[-1])
        assert outs[-1]["count"] == len(in_old[key]), (key, outs[-1], len(in_old[key]))
    assert sum(highs_new.values()) > 0
    assert read_partitions(Path(s.checkpoint), topic) == {0, 1}  # no reads: no offset ranges
    s.producer.resume()

    # 3. the watcher fired on 2 -> 4; the event-driven DAG finishes the expansion
    assert watching.fired.wait(120), "the partition-count trigger did not fire"
    assert watching.event.payload["baseline"] == 2
    assert watching.event.payload["partition_count"] == 4
    run = airflow_env.run_dag_test(module.dag)
    submitted = airflow_env.task_instance_xcom(run, "submit") or {}
    try:
        states = airflow_env.task_states(run)
        assert str(run.state) == "success" and set(states.values()) == {"success"}, states
        v2 = s.store.latest_job_model()
        assert v2.version == 2 and v2.partition_counts() == {topic: 4}
        assert {t: sorted(x.partition for x in ssps) for t, ssps in v2.task_to_ssps().items()} == {
            "Partition 0": [0, 2],
            "Partition 1": [1, 3],
        }
        result = s.verify_at_quiet_point(expected_versions=[1, 2])
        print(f"[growth outside airflow] {result.describe()}")
        assert result.ok, result.describe()
        # the job caught up with every partition: verify_at_quiet_point waited for it while the
        # producer was paused (checked after it, the resumed producer races the check)
        assert set(result.partitions_consumed) == {0, 1, 2, 3}
    finally:
        if submitted.get("detached") and detached.is_running(submitted):
            s.store.request_stop(2, "test finished")
            wait_for("the v2 job to stop", lambda: not detached.is_running(submitted),
                     timeout_s=120)  # fmt: skip


def new_partitions_written(admin, topic: str) -> bool:
    """Partitions 2 and 3 hold records. The metadata read first refreshes the client's cache:
    a long-lived AdminClient's ListOffsets on partitions added after its last metadata refresh
    fails with "No leaders found" until then (librdkafka refreshes every 5 min by default)."""
    if admin.partition_counts([topic])[topic] < 4:
        return False
    return all(n > 0 for n in admin.high_watermarks({topic: [2, 3]})[topic].values())


def read_partitions(checkpoint: Path, topic: str) -> set[int]:
    """Partitions of ``topic`` in the source offsets of every micro-batch in the Spark
    checkpoint (``offsets/<batch>``: a version line, a metadata line, one line per source)."""
    files = sorted(checkpoint.glob("**/offsets/[0-9]*"))
    assert files, f"no micro-batch offsets under {checkpoint}"
    seen: set[int] = set()
    for path in files:
        for line in path.read_text().splitlines()[2:]:
            seen |= {int(p) for p in json.loads(line).get(topic, {})}
    return seen


def caught_up_old(admin, group: str, topic: str) -> bool:
    highs = admin.high_watermarks({topic: [0, 1]})[topic]
    done = admin.group_offsets(group, {topic: [0, 1]})[topic]
    return all((done.get(p) or 0) >= highs[p] for p in (0, 1))
