"""The correctness check: read the job's output topic and coordinator topic and compare with what
the producer acknowledged.

* every key's final count equals the records produced for it (``count_mismatches``);
* no key saw a sequence violation (lost, repeated or reordered record; ``order_violations``);
* no key's count ever went back in the output stream (state lost; ``count_resets``);
* the job's consumer group committed every partition to its high watermark, including the
  partitions added by the expansions (``partitions_consumed``);
* the job model history (``job_model_versions``);
* with two streams that share their keys (orders and payments, a join): each key's final
  orders, payments and joined pairs are what was produced (every payment met its order),
  and none of them ever went back across the growth (``join_mismatches``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_samza_expand.store import CoordinatorStore


@dataclass
class Verification:
    ok: bool
    keys: int
    records_produced: int
    records_counted: int
    count_mismatches: dict[str, dict[str, int]] = field(default_factory=dict)
    order_violations: dict[str, int] = field(default_factory=dict)
    count_resets: dict[str, int] = field(default_factory=dict)
    partitions_consumed: list[int] = field(default_factory=list)
    # the job's other input streams (not grown): topic -> partitions consumed to their end
    other_partitions_consumed: dict[str, list[int]] = field(default_factory=dict)
    partitions_behind: dict[str, dict[str, int]] = field(default_factory=dict)
    job_model_versions: list[int] = field(default_factory=list)
    # key -> {field: (expected, final)} or {field + " went back": times}: the join's results
    join_mismatches: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        verdict = "PASS" if self.ok else "FAIL"
        lines = [
            f"{verdict}: {self.keys} keys, {self.records_produced} records produced, "
            f"{self.records_counted} counted; {len(self.count_mismatches)} count mismatches, "
            f"{len(self.order_violations)} keys with order violations, "
            f"{len(self.count_resets)} keys whose count went back; partitions consumed "
            f"{self.partitions_consumed}; job model versions {self.job_model_versions}"
        ]
        lines += [f"  - {p}" for p in self.problems[:10]]
        return "\n".join(lines)


def read_output_history(config: Mapping[str, Any], topic: str, timeout_s: float = 60.0) -> dict:
    """Every output record of ``topic`` from the start, as ``key -> [value dicts in order]``."""
    from confluent_kafka import KafkaError, TopicPartition

    from airflow_samza_expand._kafka.clients import Consumer

    consumer = Consumer(
        {
            **dict(config),
            "group.id": f"samza-expand-verifier-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": "false",
            "enable.partition.eof": "true",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        parts = sorted(meta.partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        pending = set(parts)
        history: dict[str, list[dict[str, Any]]] = {}
        while pending:
            msg = consumer.poll(timeout_s)
            if msg is None:
                raise TimeoutError(f"reading {topic}: partitions {sorted(pending)} unfinished")
            if msg.error():
                if msg.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                    continue  # assign() only: the verifier needs no group ACL
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(f"reading {topic}: {msg.error()}")
                pending.discard(msg.partition())
                continue
            value = json.loads(msg.value())
            history.setdefault(value["key"], []).append(value)
        return history
    finally:
        consumer.close()


def wait_for_outputs(
    config: Mapping[str, Any],
    topic: str,
    produced: Mapping[str, int],
    *,
    timeout_s: float = 120.0,
    log: Any = None,
) -> bool:
    """Wait until every produced key's newest output in ``topic`` counts all its records (the
    batch that committed last has written its outputs). False on the deadline: `verify` then
    names the keys whose outputs are missing."""
    from airflow_samza_expand._demo.jobs import wait_for

    def complete() -> bool:
        history = read_output_history(config, topic)
        return all(
            history.get(key) and int(history[key][-1]["count"]) >= n
            for key, n in produced.items()
            if n
        )

    try:
        wait_for("the job's outputs of every record", complete, timeout_s=timeout_s,
                 interval_s=0.5, log=log)  # fmt: skip
    except TimeoutError as exc:
        if log is not None:
            log(f"{exc}; verifying anyway")
        return False
    return True


def check_outputs(
    history: Mapping[str, list[Mapping[str, Any]]], produced: Mapping[str, int]
) -> tuple[dict, dict, dict, list[str]]:
    """(count mismatches, order violations, count resets, problems) of an output history."""
    mismatches: dict[str, dict[str, int]] = {}
    violations: dict[str, int] = {}
    resets: dict[str, int] = {}
    problems: list[str] = []
    for key in sorted(set(produced) | set(history)):
        outs = history.get(key, [])
        want = int(produced.get(key, 0))
        final = outs[-1] if outs else {"count": 0, "violations": 0, "last_seq": None}
        if int(final["count"]) != want:
            mismatches[key] = {"produced": want, "counted": int(final["count"])}
            problems.append(f"key {key}: produced {want}, final count {final['count']}")
        if int(final.get("violations") or 0):
            violations[key] = int(final["violations"])
            problems.append(f"key {key}: {final['violations']} sequence violation(s)")
        highest = -1
        went_back = 0
        for out in outs:
            count = int(out["count"])
            if count < highest:
                went_back += 1
            highest = max(highest, count)
        if went_back:
            resets[key] = went_back
            problems.append(f"key {key}: count went back {went_back} time(s)")
    return mismatches, violations, resets, problems


def check_join(
    history: Mapping[str, list[Mapping[str, Any]]],
    orders: Mapping[str, int],
    payments: Mapping[str, int],
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """(join mismatches, problems) of a join's output history (``examples/join_job.py``):
    per key, the final ``orders`` and ``payments`` are the records produced on each stream,
    ``joined`` is every payment that has its order (the smaller of the two), and none of the
    three ever went back (a join state lost or split over two tasks by the growth)."""
    mismatches: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for key in sorted(set(orders) | set(payments) | set(history)):
        outs = history.get(key, [])
        want = {"orders": int(orders.get(key, 0)), "payments": int(payments.get(key, 0))}
        want["joined"] = min(want.values())
        final = outs[-1] if outs else {}
        wrong: dict[str, Any] = {}
        for name, expected in want.items():
            got = int(final.get(name) or 0)
            if got != expected:
                wrong[name] = (expected, got)
                problems.append(f"key {key}: {name} {got}, expected {expected}")
            went_back = sum(int(a.get(name) or 0) > int(b.get(name) or 0)
                            for a, b in zip(outs, outs[1:], strict=False))  # fmt: skip
            if went_back:
                wrong[f"{name} went back"] = went_back
                problems.append(f"key {key}: {name} went back {went_back} time(s)")
        if wrong:
            mismatches[key] = wrong
    return mismatches, problems


def verify(
    config: Mapping[str, Any],
    *,
    job_name: str,
    input_topic: str,
    output_topic: str,
    produced: Mapping[str, int],
    store: CoordinatorStore,
    expected_versions: list[int] | None = None,
    other_inputs: Sequence[str] = (),
    joins: tuple[Mapping[str, int], Mapping[str, int]] | None = None,
) -> Verification:
    """Check the job's results against ``produced`` (records per key over every input; see the
    module docstring); ``other_inputs``: the job's other input streams; ``joins``: the records
    per key of the orders and of the payments stream, for a join (`check_join`)."""
    from airflow_samza_expand._kafka.admin import KafkaAdmin

    history = read_output_history(config, output_topic)
    mismatches, violations, resets, problems = check_outputs(history, produced)
    join_mismatches: dict[str, dict[str, Any]] = {}
    if joins is not None:
        join_mismatches, join_problems = check_join(history, *joins)
        problems += join_problems
    consumed_by_topic: dict[str, list[int]] = {}
    behind: dict[str, dict[str, int]] = {}
    with KafkaAdmin(dict(config)) as admin:
        for topic in [input_topic, *other_inputs]:
            count = admin.partition_counts([topic])[topic]
            highs = admin.high_watermarks({topic: range(count)})[topic]
            committed = admin.group_offsets(job_name, {topic: range(count)})[topic]
            consumed = consumed_by_topic.setdefault(topic, [])
            for p in range(count):
                done = committed.get(p) or 0
                if done >= highs[p]:
                    if highs[p] > 0:
                        consumed.append(p)
                    continue
                name = str(p) if topic == input_topic else f"{topic}[{p}]"
                behind[name] = {"committed": done, "high_watermark": highs[p]}
                label = f"partition {p}" if topic == input_topic else f"{topic}[{p}]"
                problems.append(f"{label}: committed {done} < high watermark {highs[p]}")
    versions = [m.version for m in store.job_model_history()]
    if expected_versions is not None and versions != expected_versions:
        problems.append(f"job model versions {versions}, expected {expected_versions}")
    finals = {k: int(v[-1]["count"]) for k, v in history.items() if v}
    ok = not (mismatches or violations or resets or behind or join_mismatches) and (
        expected_versions is None or versions == expected_versions
    )
    return Verification(
        ok=ok,
        keys=len(produced),
        records_produced=int(sum(produced.values())),
        records_counted=int(sum(finals.values())),
        count_mismatches=mismatches,
        order_violations=violations,
        count_resets=resets,
        partitions_consumed=consumed_by_topic.pop(input_topic),
        other_partitions_consumed=consumed_by_topic,
        partitions_behind=behind,
        job_model_versions=versions,
        join_mismatches=join_mismatches,
        problems=problems,
    )
