"""Read scaling of the provider's reader: the same keyed records in a topic of 2 and of 8
partitions, read by the shipped job (``read_kafka(source="python")``) with the same cores.

The reader plans one read task per Kafka partition (`spark._source_splits`), so the 8-partition
topic is read by 8 tasks a batch where the 2-partition one is read by 2; the job keeps 2 tasks
(job model) and the same state. On a Spark standalone cluster of two workers with one core each
(``spark.cores.max=2``: one executor per worker), both topics get the same two cores: this run
measures what the finer split costs (more, smaller read tasks, a Kafka consumer each); the gain
shows with more cores than partitions of the small topic (docs/testing.md, Read scaling).

Each round runs the job over both topics (available-now, the same batch cap; the order of the
two alternates between rounds, the machine's speed drifts); steady records/s = records after the
first batch / time from the first to the last group commit (as benchmarks/job_throughput.py);
the ratio is the median of the rounds' own ratios (each round's two runs follow each other, so
the drift between rounds - one topic read at 26,788 and at 36,243 records/s in one run - does
not enter it; the ratio of the medians is printed beside it). Read tasks: the most a batch
had, from the job's batch lines (the reader's own plan report, `spark.job`). Last line:
``read_tasks_2=<n> read_tasks_8=<n> rps_2=<x> rps_8=<y> ratio_8_vs_2=<median of rounds' y/x>``
(``rps_*``: the medians).

    .venv/bin/python benchmarks/read_scaling.py [--records 400000] [--rounds 3] [--smoke]
    .venv/bin/python benchmarks/read_scaling.py --cores 8  # two workers of four cores

``--smoke``: 4,000 records in batches of 1,000, one round, local[2], the development broker
(same code and last line). ``--cores 8``: the application gets eight cores (two workers of four,
one executor each; local[8] with --smoke), so the 8-partition topic is read by 8 tasks a batch.
Kafka: ``--kafka apache`` (default; Maven-fetched) or ``dev``;
KAFKA_BOOTSTRAP_SERVERS wins.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

READ_TASKS = re.compile(r"read by (\d+) tasks on job model v\d+")


def start_kafka(kind: str) -> tuple[Any, str]:
    """(process to stop or None, bootstrap): KAFKA_BOOTSTRAP_SERVERS, else the chosen broker."""
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if bootstrap:
        return None, bootstrap
    if kind == "apache":
        from airflow_samza_expand._testing import ApacheKafkaProcess

        kafka = ApacheKafkaProcess(log_level="WARN").start()
        return kafka, kafka.bootstrap
    from airflow_samza_expand._testing.process import DevBrokerProcess

    broker = DevBrokerProcess(log_level="WARNING").start()
    return broker, broker.bootstrap


def produce(bootstrap: str, topics: list[str], records: int, keys: int) -> None:
    """The same keyed, sequenced records into every topic (the client's keyed partitioner)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20})
    seq = [0] * keys
    for i in range(records):
        k = i % keys
        value = json.dumps({"seq": seq[k], "payload": "x" * 40}).encode()
        seq[k] += 1
        for topic in topics:
            while len(producer) >= 50_000:
                producer.poll(0.05)
            producer.produce(topic, key=f"key-{k}".encode(), value=value)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0


def committed_total(consumer: Consumer, topic: str, partitions: int) -> int:
    tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    return sum(max(tp.offset, 0) for tp in tps)


def run_job(
    bootstrap: str, topic: str, partitions: int, output: str, records: int, cap: int,
    master: str, workdir: str, cores: int = 2,
) -> dict[str, Any]:  # fmt: skip
    """The shipped job over ``topic`` (available-now): steady rec/s and the most read tasks of
    a batch."""
    from airflow_samza_expand.core.model import JobModel
    from airflow_samza_expand.store import open_store

    name = f"bench-read-{partitions}-{uuid.uuid4().hex[:6]}"  # a fresh group per run
    coordinator = os.path.join(workdir, "coordinator")
    open_store(coordinator, name).write_job_model(JobModel.initial(name, {topic: 2}))
    if partitions != 2:  # the grown job model: 2 fixed tasks, every partition read
        from airflow_samza_expand.core._plan import plan_expansion

        store = open_store(coordinator, name)
        v1 = store.latest_job_model()
        store.write_job_model(plan_expansion(v1, {topic: 2}, {topic: partitions}).new_job_model)
    cmd = [
        sys.executable, "-m", "airflow_samza_expand.spark.job",
        "--job-name", name, "--bootstrap-servers", bootstrap, "--coordinator", coordinator,
        "--checkpoint-dir", os.path.join(workdir, "checkpoint"), "--output-topic", output,
        "--trigger", "available-now", "--max-records-per-batch", str(cap),
        "--shuffle-partitions", "2", "--state-buckets", "16", "--master", master,
        "--spark-conf", "spark.ui.enabled=false", "--spark-conf", f"spark.cores.max={cores}",
        "--spark-conf", f"spark.executor.cores={max(1, cores // 2)}",
    ]  # fmt: skip
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    watcher = Consumer({"bootstrap.servers": bootstrap, "group.id": name})
    log_path = os.path.join(workdir, "job.log")
    commits: list[tuple[float, int]] = []
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        while proc.poll() is None:
            done = committed_total(watcher, topic, partitions)
            if done and (not commits or done != commits[-1][1]):
                commits.append((time.perf_counter(), done))
            time.sleep(0.05)
    done = committed_total(watcher, topic, partitions)
    if not commits or done != commits[-1][1]:
        commits.append((time.perf_counter(), done))
    watcher.close()
    with open(log_path, encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    if proc.returncode != 0 or done != records:
        raise SystemExit(f"job failed (rc {proc.returncode}, committed {done}):\n{text[-4000:]}")
    (first_t, first_n), (last_t, last_n) = commits[0], commits[-1]
    steady = (last_n - first_n) / (last_t - first_t) if last_t > first_t else float("nan")
    tasks = [int(m) for m in READ_TASKS.findall(text)]
    return {"rps": steady, "read_tasks": max(tasks, default=0), "batches": len(tasks)}


def paired_ratios(runs: dict[int, list[dict[str, Any]]]) -> list[float]:
    """Each round's 8-partition rate over its 2-partition rate: the two runs of a round follow
    each other, so the machine's drift between rounds cancels out of the ratio."""
    return [big["rps"] / small["rps"] for small, big in zip(runs[2], runs[8], strict=True)]


def two_workers(worker_cores: int) -> Any:
    """A standalone master with two workers of ``worker_cores`` each (the testing cluster starts
    one; the second registers with the same master)."""
    from airflow_samza_expand._testing.launch import free_port, wait_until
    from airflow_samza_expand._testing.spark_standalone import SparkStandalone

    cluster = SparkStandalone(worker_cores=worker_cores, worker_memory="2g").start()
    try:
        second = cluster._spawn(
            "worker2", "org.apache.spark.deploy.worker.Worker",
            "--host", cluster.host, "--port", str(free_port(cluster.host)),
            "--webui-port", str(free_port(cluster.host)), "--cores", str(worker_cores),
            "--memory", "2g", "--work-dir", str(cluster.work / "worker2"), cluster.master_url,
        )  # fmt: skip
        cluster.second_worker = second
        wait_until("the second Spark worker to register ALIVE",
                   lambda: (cluster._status() or {}).get("aliveworkers", 0) >= 2,
                   timeout_s=120)  # fmt: skip
    except BaseException:
        close_cluster(cluster)
        raise
    return cluster


def close_cluster(cluster: Any) -> None:
    from airflow_samza_expand._testing.launch import stop_pid

    stop_pid(getattr(cluster, "second_worker", None), "the second Spark worker")
    cluster.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--max-records-per-batch", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each topic (medians)")
    parser.add_argument("--master", default="standalone",
                        help="standalone (two 1-core workers) or a Spark master URL")  # fmt: skip
    parser.add_argument("--cores", type=int, default=2,
                        help="the application's cores (two workers of half each)")  # fmt: skip
    parser.add_argument("--kafka", choices=["dev", "apache"], default=None,
                        help="Kafka to start (default apache; dev with --smoke)")  # fmt: skip
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="CI size: 4,000 records, batches of 1,000, one round, local[2]",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.records, args.keys, args.max_records_per_batch, args.rounds = 4_000, 100, 1_000, 1
        args.master = f"local[{args.cores}]" if args.master == "standalone" else args.master
    kafka = args.kafka or ("dev" if args.smoke else "apache")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    broker, bootstrap = start_kafka(kafka)
    cluster = None
    try:
        suffix = uuid.uuid4().hex[:8]
        topics = {2: f"bench-read2-{suffix}", 8: f"bench-read8-{suffix}"}
        output = f"bench-read-out-{suffix}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for name, count in ((topics[2], 2), (topics[8], 8), (output, 1)):
            admin.create_topics([NewTopic(name, count, 1)])[name].result(30)
        for name, count in ((topics[2], 2), (topics[8], 8)):
            while len(admin.list_topics(name, timeout=10).topics[name].partitions) < count:
                time.sleep(0.1)  # a broker lists a new topic a moment after its creation
        del admin  # its client would log reconnects after the broker stops, past the last line
        started = time.perf_counter()
        produce(bootstrap, list(topics.values()), args.records, args.keys)
        print(
            f"produced {args.records} records over {args.keys} keys into {topics[2]} (2 "
            f"partitions) and {topics[8]} (8) in {time.perf_counter() - started:.1f}s"
        )
        master = args.master
        if master == "standalone":
            cluster = two_workers(max(1, args.cores // 2))
            master = cluster.master_url
        print(f"master {master} ({args.cores} cores: spark.cores.max={args.cores}, "
              f"spark.executor.cores={max(1, args.cores // 2)})", flush=True)  # fmt: skip
        runs: dict[int, list[dict[str, Any]]] = {2: [], 8: []}
        for round_no in range(args.rounds):
            for n in (2, 8) if round_no % 2 == 0 else (8, 2):
                with tempfile.TemporaryDirectory(prefix="bench-read-") as workdir:
                    run = run_job(bootstrap, topics[n], n, output, args.records,
                                  args.max_records_per_batch, master, workdir,
                                  args.cores)  # fmt: skip
                runs[n].append(run)
                print(
                    f"round {round_no + 1}, {n} partitions: {run['rps']:,.0f} rec/s steady, "
                    f"{run['batches']} batches, at most {run['read_tasks']} read tasks a batch",
                    flush=True,
                )
        rps = {n: statistics.median(r["rps"] for r in runs[n]) for n in runs}
        tasks = {n: max(r["read_tasks"] for r in runs[n]) for n in runs}
        paired = paired_ratios(runs)
        print(f"load average: {os.getloadavg()}")
        print(f"rounds' ratios: {', '.join(f'{r:.3f}' for r in paired)}; ratio of the "
              f"medians {rps[8] / rps[2]:.3f}")  # fmt: skip
        print(
            f"read_tasks_2={tasks[2]} read_tasks_8={tasks[8]} rps_2={rps[2]:.0f} "
            f"rps_8={rps[8]:.0f} ratio_8_vs_2={statistics.median(paired):.3f}"
        )
    finally:
        if cluster is not None:
            close_cluster(cluster)
        if broker is not None:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
