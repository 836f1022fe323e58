"""Throughput of the stateful PySpark job against a plain confluent-kafka consume loop.

Produces RECORDS sequenced records over KEYS keys to a 2-partition topic, then in the same run:

1. raw: one confluent-kafka consumer reads them all (assign, consume() in batches);
2. job: ``python -m airflow_samza_expand.spark.job --trigger available-now`` (local[2]) over
   the same records; steady-state records/s = records after the first batch / time from the
   first to the last group commit; submit-to-first-commit = process start to the first commit
   of consumer group ``<job>``;
3. profile: Spark's per-batch durations (from ``--progress-file``) and, outside Spark, the
   cost of the source's Kafka->Arrow read and of the processor over the same records;
4. the yardstick: the same stateful count read with Spark's own JVM Kafka source
   (spark-sql-kafka-0-10 of the installed pyspark's version, fetched with Maven from
   airflow_samza_expand/_testing/spark_kafka.py into ~/.cache/airflow-samza-expand, --jars;
   benchmarks/jvm_kafka_source_count.py), same records, same batch cap, steady rate measured
   the same way (records after the first batch / time from the first batch's end to the last's).

Steps 2 and 4 run on each ``--masters`` entry: ``local`` (local[2]) and ``standalone`` (a Spark
standalone master + worker started from pyspark on 127.0.0.1; each application gets 2 cores).
Kafka: ``--kafka dev`` (development broker, default) or ``apache`` (Apache Kafka fetched with
Maven); KAFKA_BOOTSTRAP_SERVERS wins. One last line per master:
``job_rps=<x> raw_rps=<y> ratio=<x/y> jvm_source_rps=<z> ratio_jvm=<x/z>
submit_to_first_commit_s=<s> master=<local|standalone> runtime_rps=<r> ratio_runtime_jvm=<r/z>``
(``runtime_rps``: step 4's query on the runtime - ``spark.runtime`` attach with the lease,
``read_kafka()``, ``run`` with its group commits and heartbeats - beside the bare query).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def produce(bootstrap: str, topic: str, records: int, keys: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20})
    seq = [0] * keys
    for i in range(records):
        k = i % keys
        value = json.dumps({"seq": seq[k], "payload": "x" * 40}).encode()
        seq[k] += 1
        send(producer, i, topic, f"key-{k}".encode(), value)
    assert producer.flush(120) == 0


def send(
    producer: Producer, i: int, topic: str, key: bytes, value: bytes, partition: int = -1
) -> None:
    """Produce record ``i``, first draining the client's queue below half its default limit
    (100,000 messages) so that ``produce`` never finds it full."""
    while len(producer) >= 50_000:
        producer.poll(0.05)
    producer.produce(topic, key=key, value=value, partition=partition)
    if i % 10_000 == 0:
        producer.poll(0)


def raw_loop(bootstrap: str, topic: str, partitions: int) -> tuple[int, float]:
    """Read every record with a plain consumer; (records, seconds)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"raw-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    started = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    pending, count = set(range(partitions)), 0
    while pending:
        for msg in consumer.consume(num_messages=10_000, timeout=1.0):
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())
                continue
            msg.key()
            msg.value()
            count += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    return count, elapsed


def committed_total(consumer: Consumer, topic: str, partitions: int) -> int:
    tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    return sum(max(tp.offset, 0) for tp in tps)


def run_job(
    bootstrap: str,
    topic: str,
    output: str,
    partitions: int,
    records: int,
    workdir: str,
    cap: int,
    buckets: int,
    master: str = "local[2]",
    extra: tuple[str, ...] = (),
    grown_from: int | None = None,
) -> dict[str, Any]:
    """Run the shipped job (available-now) over the topic; ``grown_from``: job model v2 of a
    growth ``grown_from -> partitions`` (v1 written first); ``extra``: more job arguments."""
    from airflow_samza_expand.core._plan import plan_expansion
    from airflow_samza_expand.core.model import JobModel
    from airflow_samza_expand.store import open_store

    where = "standalone" if master.startswith("spark://") else "local"
    name = f"bench-{topic}-b{buckets}-{where}-{uuid.uuid4().hex[:6]}"  # a fresh group per run
    coordinator = os.path.join(workdir, "coordinator")
    store = open_store(coordinator, name)
    if grown_from is None:
        store.write_job_model(JobModel.initial(name, {topic: partitions}))
    else:
        v1 = store.write_job_model(JobModel.initial(name, {topic: grown_from}))
        store.write_job_model(
            plan_expansion(v1, {topic: grown_from}, {topic: partitions}).new_job_model
        )
    progress_file = os.path.join(workdir, "progress.jsonl")
    cmd = [
        sys.executable, "-m", "airflow_samza_expand.spark.job",
        "--job-name", name, "--bootstrap-servers", bootstrap, "--coordinator", coordinator,
        "--checkpoint-dir", os.path.join(workdir, "checkpoint"), "--output-topic", output,
        "--trigger", "available-now", "--max-records-per-batch", str(cap),
        "--shuffle-partitions", "2", "--progress-file", progress_file,
        "--state-buckets", str(buckets), "--master", master,
        "--spark-conf", "spark.ui.enabled=false", "--spark-conf", "spark.cores.max=2",
        *extra,
    ]  # fmt: skip
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    watcher = Consumer({"bootstrap.servers": bootstrap, "group.id": name})
    log_path = os.path.join(workdir, "job.log")
    commits: list[tuple[float, int]] = []
    submitted = time.perf_counter()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        while True:
            done = committed_total(watcher, topic, partitions)
            now = time.perf_counter()
            if done and (not commits or done != commits[-1][1]):
                commits.append((now, done))
            if proc.poll() is not None:
                break
            time.sleep(0.05)
    finished = time.perf_counter()
    done = committed_total(watcher, topic, partitions)
    if not commits or done != commits[-1][1]:
        commits.append((finished, done))
    watcher.close()
    if proc.returncode != 0 or done != records:
        with open(log_path, encoding="utf-8", errors="replace") as handle:
            tail = handle.read()[-4000:]
        raise SystemExit(f"job failed (rc {proc.returncode}, committed {done}):\n{tail}")
    first_t, first_n = commits[0]
    last_t, last_n = commits[-1]
    steady = (last_n - first_n) / (last_t - first_t) if last_t > first_t else float("nan")
    with open(progress_file, encoding="utf-8") as handle:
        lines = [json.loads(line) for line in handle if line.strip()]
    batches = [line for line in lines if "batchId" in line]
    return {
        "order": [line for line in lines if "stale_placements" in line],
        "submit_to_first_commit_s": first_t - submitted,
        "wall_s": finished - submitted,
        "steady_rps": steady,
        "end_to_end_rps": records / (last_t - submitted),
        "batches": batches,
        "commits": commits,
    }


class _State:
    """A new key's GroupState (no saved state) for running the stateful function alone."""

    exists = False

    def update(self, value: tuple) -> None:
        self.value = value


def profile_outside_spark(bootstrap: str, topic: str, partitions: int) -> dict[str, float]:
    """Seconds of the source's read (Kafka -> Arrow) and of the processor, without Spark."""
    import pyarrow as pa

    from airflow_samza_expand.spark._processor import DEFAULT_PROCESSOR
    from airflow_samza_expand.spark._source import SOURCE_SCHEMA, read_ranges
    from airflow_samza_expand.spark._state import StatefulFunction

    lows_highs = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-marks"})
    ranges = []
    for p in range(partitions):
        low, high = lows_highs.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        ranges.append((topic, p, low, high))
    lows_highs.close()
    started = time.perf_counter()
    tables = []
    for r in ranges:
        tables += list(
            read_ranges({"bootstrap_servers": bootstrap}, "bench", f"Partition {r[1]}", [r],
                        SOURCE_SCHEMA)
        )  # fmt: skip
    read_s = time.perf_counter() - started
    started = time.perf_counter()
    frame = pa.Table.from_batches(tables).to_pandas()
    to_pandas_s = time.perf_counter() - started
    function = StatefulFunction(DEFAULT_PROCESSOR)
    started = time.perf_counter()
    for group_key, rows in frame.groupby(["task", "key"], sort=False):
        for _ in function(group_key, iter([rows]), _State()):
            pass
    process_s = time.perf_counter() - started
    return {
        "source_read_s": read_s,
        "arrow_to_pandas_s": to_pandas_s,
        "stateful_function_per_key_s": process_s,
    }


def run_jvm_source(
    bootstrap: str, topic: str, partitions: int, records: int, workdir: str, cap: int,
    master: str, jars: list[str], buckets: int, on_runtime: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """The same stateful count (same state layout) with Spark's JVM Kafka source
    (jvm_kafka_source_count.py); ``on_runtime``: read and driven by ``spark.runtime``."""
    from datetime import datetime

    from airflow_samza_expand._demo.jobs import spark_submit_binary
    from airflow_samza_expand.spark._python_workers import PYTHON_WORKER_CONF

    admin = AdminClient({"bootstrap.servers": bootstrap})
    output = f"{topic}-jvm-out-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(output, 1, 1)])[output].result(30)
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jvm_kafka_source_count.py")
    cmd = [
        spark_submit_binary(), "--master", master, "--jars", ",".join(jars),
        "--conf", "spark.ui.enabled=false", "--conf", "spark.cores.max=2",
        "--conf", "spark.sql.shuffle.partitions=2", "--driver-memory", "768m",
        # the shipped job's Python-worker settings (spark._python_workers): the same for both
        *(arg for key, value in PYTHON_WORKER_CONF.items() for arg in ("--conf", f"{key}={value}")),
        script, bootstrap, topic, str(partitions), output,
        os.path.join(workdir, "jvm-checkpoint"), str(cap), str(buckets),
    ]  # fmt: skip
    if on_runtime:  # job model v1 of the topic in a file store; the runtime attaches to it
        from airflow_samza_expand.core.model import JobModel
        from airflow_samza_expand.store._files import FileCoordinatorStore

        job, store_dir = f"bench-runtime-{uuid.uuid4().hex[:6]}", os.path.join(workdir, "store")
        FileCoordinatorStore(store_dir, job).write_job_model(
            JobModel.initial(job, {topic: partitions}))  # fmt: skip
        cmd += [store_dir, job]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    wall = time.perf_counter() - started
    line = next((x for x in proc.stdout.splitlines() if x.startswith("JVM_SOURCE_RESULT ")), None)
    if proc.returncode != 0 or line is None:
        raise SystemExit(f"JVM source run failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    batches = json.loads(line.split(" ", 1)[1])["batches"]
    assert sum(b["numInputRows"] for b in batches) == records, batches

    def end(b: dict) -> float:
        start = datetime.fromisoformat(b["timestamp"].replace("Z", "+00:00")).timestamp()
        return start + b["triggerExecution"] / 1000

    if len(batches) > 1:
        steady = sum(b["numInputRows"] for b in batches[1:]) / (end(batches[-1]) - end(batches[0]))
    else:
        steady = batches[0]["numInputRows"] / (batches[0]["triggerExecution"] / 1000)
    return {"steady_rps": steady, "wall_s": wall, "batches": batches}


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


def run_layouts(
    args: argparse.Namespace, bootstrap: str, topic: str, output: str, master: str,
    layouts: list[int],
) -> dict[str, Any]:  # fmt: skip
    """Run the job once per state layout on ``master``; print its figures; the last result."""
    result: dict[str, Any] = {}
    for buckets in layouts:
        with tempfile.TemporaryDirectory(prefix="bench-job-") as workdir:
            result = run_job(
                bootstrap, topic, output, args.partitions, args.records, workdir,
                args.max_records_per_batch, buckets, master,
            )  # fmt: skip
        layout = f"{buckets} state buckets" if buckets else "state per key"
        print(
            f"job ({layout}): wall {result['wall_s']:.1f}s (incl. JVM start), "
            f"submit->first commit {result['submit_to_first_commit_s']:.1f}s, steady "
            f"{result['steady_rps']:,.0f} rec/s, end-to-end {result['end_to_end_rps']:,.0f}"
            " rec/s"
        )
        print("  Spark time per batch (ms):")
        totals: dict[str, int] = defaultdict(int)
        for batch in result["batches"]:
            d = batch["durationMs"]
            print(
                f"    batch {batch['batchId']}: {batch['numInputRows']} rows, trigger "
                f"{d.get('triggerExecution', 0)} = addBatch {d.get('addBatch', 0)} (read, "
                f"shuffle, state, output) + latestOffset {d.get('latestOffset', 0)} + "
                f"planning {d.get('queryPlanning', 0)} + walCommit {d.get('walCommit', 0)} + "
                f"commitOffsets {d.get('commitOffsets', 0)}; state rows {batch['stateRows']}"
            )
            for k, v in d.items():
                totals[k] += v
        print("    totals (ms): " + json.dumps(dict(sorted(totals.items()))))
    return result


def produce_stale_third(bootstrap: str, topic: str, records: int, keys: int) -> int:
    """Into a topic grown 2 -> 4 (before any record: the barrier snapshot is 0): a third of the
    records from keys that moved, placed by a stale producer in their old partition
    (``murmur2 % 2``), the rest where they belong (``% 4``). Returns the stale records."""
    from airflow_samza_expand._kafka.partitioners import murmur2_partition

    names = [f"key-{k}" for k in range(keys * 4)]
    moved = [k for k in names if murmur2_partition(k.encode(), 4) >= 2][: max(1, keys // 3)]
    fresh = [k for k in names if k not in set(moved)][: keys - len(moved)]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20})
    seq: dict[str, int] = defaultdict(int)
    stale = 0
    for i in range(records):
        if i % 3 == 0:
            key = moved[i // 3 % len(moved)]
            partition = murmur2_partition(key.encode(), 2)
            stale += 1
        else:
            key = fresh[i % len(fresh)]
            partition = murmur2_partition(key.encode(), 4)
        value = json.dumps({"seq": seq[key], "payload": "x" * 40}).encode()
        seq[key] += 1
        send(producer, i, topic, key.encode(), value, partition)
    assert producer.flush(120) == 0
    return stale


def order_check_run(args: argparse.Namespace, bootstrap: str) -> str:
    """The job's rate with the order check on and off over the same records (a third stale
    placements beyond a barrier), alternating runs; the separate scan's rate over the same
    old partitions; the last line."""
    from airflow_samza_expand._protocol.barrier.stale_scan import StaleScanner, scan_until_caught_up

    suffix = uuid.uuid4().hex[:8]
    topic, output = f"bench-order-{suffix}", f"bench-order-out-{suffix}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for name, count in ((topic, 2), (output, 1)):
        admin.create_topics([NewTopic(name, count, 1)])[name].result(30)
    from confluent_kafka.admin import NewPartitions

    admin.create_partitions([NewPartitions(topic, 4)])[topic].result(30)
    while len(admin.list_topics(topic, timeout=10).topics[topic].partitions) < 4:
        time.sleep(0.1)  # metadata catching up with the growth (the producer asks next)
    stale = produce_stale_third(bootstrap, topic, args.records, args.keys)
    print(f"produced {args.records} records ({stale} stale placements beyond the barrier)")
    barrier = json.dumps({topic: {"0": 0, "1": 0}})
    check = ("--barrier-offsets", barrier, "--partitioner", "murmur2")
    buckets = (args.state_buckets or [16])[-1]
    rates: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(args.order_check_rounds):
        for mode in ("off", "on"):
            with tempfile.TemporaryDirectory(prefix="bench-order-") as workdir:
                result = run_job(
                    bootstrap, topic, output, 4, args.records, workdir,
                    args.max_records_per_batch, buckets, extra=check if mode == "on" else (),
                    grown_from=2,
                )  # fmt: skip
            if mode == "on":
                last = result["order"][-1]
                counted = last["stale_placements"]["records"]
                assert counted == stale, (counted, stale)
                print(f"  order check counted {counted} stale placements by {last['counted_by']}")
            rates[mode].append(result["steady_rps"])
            print(f"job, order check {mode}: steady {result['steady_rps']:,.0f} rec/s, wall "
                  f"{result['wall_s']:.1f}s over {len(result['batches'])} batches")  # fmt: skip
    started = time.perf_counter()
    with StaleScanner({"bootstrap.servers": bootstrap}, {topic: (2, 4)}, "murmur2") as scanner:
        scanned = scan_until_caught_up(scanner, {topic: {0: 0, 1: 0}})
    scan_s = time.perf_counter() - started
    scan_rps = scanned.records_read / scan_s
    print(f"separate scan (one process) of the old partitions: {scanned.records_read} records, "
          f"{len(scanned.placements)} stale, {scan_rps:,.0f} rec/s")  # fmt: skip
    on, off = statistics.median(rates["on"]), statistics.median(rates["off"])
    return (
        f"order_check_ratio={on / off:.3f} job_rps_on={on:.0f} job_rps_off={off:.0f} "
        f"scan_rps={scan_rps:.0f} stale_records={stale} records={args.records}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--max-records-per-batch", type=int, default=100_000)
    parser.add_argument(
        "--state-buckets",
        type=int,
        action="append",
        help="job state layouts to run (repeatable; 0 = one state row per key); the last one "
        "goes on the last line (default: 0 then 16; other masters run only the last one)",
    )
    parser.add_argument("--masters", default="local,standalone",
                        help="comma-separated: local (local[2]) and/or standalone")  # fmt: skip
    parser.add_argument("--kafka", choices=["dev", "apache"], default="dev",
                        help="Kafka to start (KAFKA_BOOTSTRAP_SERVERS wins)")  # fmt: skip
    parser.add_argument(
        "--order-check",
        action="store_true",
        help="instead: the job's rate with the order check on and off over the same "
        "records, a third of them stale placements beyond a barrier; last line "
        "order_check_ratio=<on/off> ...",
    )
    parser.add_argument("--order-check-rounds", type=int, default=2,
                        help="off/on pairs of runs (the median rates are compared)")  # fmt: skip
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="CI size: 2,000 records over 50 keys in batches of 1,000, local[2] only, one state "
        "layout (16 buckets), one order-check round (same code and last line)",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.records, args.keys, args.max_records_per_batch = 2_000, 50, 1_000
        args.masters, args.state_buckets, args.order_check_rounds = "local", [16], 1
    masters = [m.strip() for m in args.masters.split(",") if m.strip()]
    if not masters or set(masters) - {"local", "standalone"}:
        parser.error(f"--masters {args.masters!r}: use local and/or standalone")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from airflow_samza_expand._testing.spark_kafka import connector_jars

    jars = connector_jars()
    print(f"JVM Kafka source jars: {', '.join(os.path.basename(j) for j in jars)}")

    broker, bootstrap = start_kafka(args.kafka)
    cluster = None
    try:
        if args.order_check:
            print(order_check_run(args, bootstrap))
            return 0
        suffix = uuid.uuid4().hex[:8]
        topic, output = f"bench-in-{suffix}", f"bench-out-{suffix}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for name, count in ((topic, args.partitions), (output, 1)):
            admin.create_topics([NewTopic(name, count, 1)])[name].result(30)
        started = time.perf_counter()
        produce(bootstrap, topic, args.records, args.keys)
        print(f"produced {args.records} records, {args.keys} keys, {args.partitions} partitions "
              f"in {time.perf_counter() - started:.1f}s")  # fmt: skip

        raw_n, raw_s = raw_loop(bootstrap, topic, args.partitions)
        assert raw_n == args.records, (raw_n, args.records)
        raw_rps = raw_n / raw_s
        print(f"raw confluent-kafka loop: {raw_n} records in {raw_s:.2f}s = {raw_rps:,.0f} rec/s")

        lines = []
        layouts = args.state_buckets or [0, 16]
        for name in masters:
            master = "local[2]"
            if name == "standalone":
                from airflow_samza_expand._testing.spark_standalone import SparkStandalone

                cluster = SparkStandalone().start()
                master = cluster.master_url
            print(f"--- master {name}: {master}")
            result = run_layouts(args, bootstrap, topic, output, master,
                                 layouts if name == masters[0] else layouts[-1:])  # fmt: skip
            with tempfile.TemporaryDirectory(prefix="bench-jvm-") as workdir:
                jvm = run_jvm_source(bootstrap, topic, args.partitions, args.records, workdir,
                                     args.max_records_per_batch, master, jars,
                                     layouts[-1])  # fmt: skip
            with tempfile.TemporaryDirectory(prefix="bench-runtime-") as workdir:
                on_rt = run_jvm_source(bootstrap, topic, args.partitions, args.records, workdir,
                                       args.max_records_per_batch, master, jars, layouts[-1],
                                       on_runtime=True)  # fmt: skip
            jvm_rps, runtime_rps = jvm["steady_rps"], on_rt["steady_rps"]
            print(
                f"runtime on Spark's Kafka source ({name}): wall {on_rt['wall_s']:.1f}s, "
                f"steady {runtime_rps:,.0f} rec/s over {len(on_rt['batches'])} batches"
            )
            print(f"JVM Kafka source ({name}, {layouts[-1]} state buckets): wall "
                  f"{jvm['wall_s']:.1f}s (incl. JVM start), steady {jvm_rps:,.0f} rec/s "
                  f"over {len(jvm['batches'])} batches")  # fmt: skip
            if cluster is not None:
                cluster.close()
                cluster = None
            job_rps = result["steady_rps"]
            lines.append(
                f"job_rps={job_rps:.0f} raw_rps={raw_rps:.0f} ratio={job_rps / raw_rps:.3f} "
                f"jvm_source_rps={jvm_rps:.0f} ratio_jvm={job_rps / jvm_rps:.3f} "
                f"submit_to_first_commit_s={result['submit_to_first_commit_s']:.1f} master={name} "
                f"runtime_rps={runtime_rps:.0f} ratio_runtime_jvm={runtime_rps / jvm_rps:.3f}"
            )
        outside = profile_outside_spark(bootstrap, topic, args.partitions)
        print(
            "profile outside Spark, same records, one process: "
            + ", ".join(f"{k} {v:.2f}" for k, v in outside.items())
        )
        print(f"load average during the run: {os.getloadavg()}")
        for line in lines:
            print(line)
    finally:
        if cluster is not None:
            cluster.close()
        if broker is not None:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
