"""Cost of the plan's reader discovery (protocol.readers.find_readers) as jobs and groups grow.

N managed jobs (each a coordinator topic with job model v1; half of them read the grown topic)
and N other consumer groups (half with a committed offset on it) are created, then
`find_readers` is timed (median of --runs): ListMetadata, one coordinator read per job, one
ListGroups and one OffsetFetch per group. Uses KAFKA_BOOTSTRAP_SERVERS if set, else starts the
development broker. Figures only (a shared machine) - no pass/fail. Last line:

    find_readers_s[<n>]=<x> ...
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from contextlib import ExitStack

from confluent_kafka import Consumer, TopicPartition

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand._protocol.steps.plan.readers import find_readers
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore


def populate(config: dict, admin: KafkaAdmin, topic: str, other: str, n: int, tag: str) -> None:
    for i in range(n):
        name = f"bench-{tag}-job-{i}"
        with KafkaCoordinatorStore(config, name) as store:
            store.write_job_model(JobModel.initial(name, {topic if i % 2 else other: 2}))
        group = f"bench-{tag}-group-{i}"
        consumer = Consumer({**config, "group.id": group, "enable.auto.commit": "false"})
        try:
            target = topic if i % 2 else other
            consumer.commit(offsets=[TopicPartition(target, 0, 1)], asynchronous=False)
        finally:
            consumer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--smoke", action="store_true", help="CI size: 2 jobs + 2 groups, 1 run (same last line)"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.runs = [2], 1
    figures = []
    with ExitStack() as stack:
        bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
        if not bootstrap:
            from airflow_samza_expand._testing import DevBrokerProcess

            bootstrap = stack.enter_context(DevBrokerProcess(log_level="WARNING")).bootstrap
        config = client_config(bootstrap)
        admin = stack.enter_context(KafkaAdmin(config, timeout_s=30))
        done = 0
        for size in sorted(args.sizes):
            tag = uuid.uuid4().hex[:6]
            topic, other = f"bench-orders-{tag}", f"bench-other-{tag}"
            admin.ensure_topic(topic, 2)
            admin.ensure_topic(other, 2)
            populate(config, admin, topic, other, size - done, tag)
            done = size
            times = []
            for _ in range(args.runs):
                start = time.perf_counter()
                readers = find_readers(admin, [topic])
                times.append(time.perf_counter() - start)
            print(
                f"{size} jobs + {size} groups on the broker: {len(readers.jobs())} jobs and "
                f"{len(readers.groups())} groups read the topic; median "
                f"{statistics.median(times):.3f}s"
            )
            figures.append(f"find_readers_s[{size}]={statistics.median(times):.3f}")
    print(" ".join(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
