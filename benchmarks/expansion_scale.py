"""How an expansion's cost grows with the topic: the protocol chain on the three-broker Apache
Kafka cluster (`_testing.apache_kafka_cluster`: replication 3) for topics of 8, 64, 256 and
512 partitions, each grown x2, under keyed traffic (10,000 keys).

The chain without a job, step by step, with the provider's own step functions (what the
factory DAG's tasks call): ``plan`` (the partitioner check samples every partition), ``expand``
(the topic grown), the barrier (grace, the look for stale placements before the snapshot, the
snapshot, the group's lag; `barrier_poll` until it passes), ``write`` (job model vN+1 through
the coordinator topic). The job's consumer group is kept at the log end by this process (a job
that drains at once), so the barrier's wait against its floor (max(grace, last stale placement
+ quiet) + drain + one poll, drain 0) is the chain's own overhead. Per size: seconds per step,
barrier polls and seconds per poll, the barrier's wait over its floor, the job model's and
the expansion record's sizes (bytes of JSON), and the job page's response time: the UI's data
function (`read_job`: coordinator topic, heartbeats, leases, live counts, the barrier's lag)
and its HTML (`html.job_page` with the model's SVG), timed directly in this process (starting
the api-server only adds its HTTP layer, the same for every size).

``--jobs 8,64,256`` (Spark-heavy: run it under the Spark lock) adds, per size, the factory
DAG's expansion (``dag.test()``) with a job running: the shipped job switching in place and the
example user job restarting its query in-app (`_expansion_scale_jobs`): seconds per step, the
barrier's wait over its floor (drain included), the switch's downtime over a cold restart of
the same job, the moved keys' latency over the grace, exact counts. Without it
``ratio_in_place_max`` and ``ratio_in_app_max`` are ``n/a``.

    .venv/bin/python benchmarks/expansion_scale.py [--sizes 8,64,256,512] [--jobs 8,64] [--smoke]
    .venv/bin/python benchmarks/expansion_scale.py --sizes '' --jobs 256 --job-kinds in-app

Progress lines per step while it runs, one line per size, and the last line:
``sizes=<...> barrier_over_floor_max=<x> plan_s_max=<s> ratio_in_place_max=<x>
ratio_in_app_max=<x> page_ms_max=<ms>`` (one line). ``--smoke``: size 4 (-> 8), 400 keys, on
KAFKA_BOOTSTRAP_SERVERS or the development broker (same code, same last line).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
GRACE_S = 3.0
QUIET_S = 1.0
POLL_S = 0.5


def say(text: str) -> None:
    print(text, flush=True)


@dataclass
class SizeResult:
    size: int
    steps: dict[str, float] = field(default_factory=dict)
    polls: int = 0
    poll_s: float = 0.0
    barrier_over_floor: float = 0.0
    model_bytes: int = 0
    record_bytes: int = 0
    page_ms: float = 0.0
    page_bytes: int = 0

    def line(self) -> str:
        steps = " ".join(f"{k}_s={v:.3f}" for k, v in self.steps.items())
        return (
            f"size={self.size}->{2 * self.size} {steps} barrier_polls={self.polls} "
            f"poll_s={self.poll_s:.3f} barrier_over_floor={self.barrier_over_floor:.2f} "
            f"model_bytes={self.model_bytes} record_bytes={self.record_bytes} "
            f"page_ms={self.page_ms:.0f} page_bytes={self.page_bytes}"
        )


class Traffic(threading.Thread):
    """A keyed producer (``keys`` keys, round robin) at about ``rate`` records/s, its metadata
    refreshed every second (it finds new partitions within the grace)."""

    def __init__(self, config: dict[str, str], topic: str, keys: int, rate: float) -> None:
        super().__init__(name="traffic", daemon=True)
        from confluent_kafka import Producer

        self.producer = Producer({**config, "topic.metadata.refresh.interval.ms": "1000",
                                  "linger.ms": "20"})  # fmt: skip
        self.topic, self.keys, self.rate = topic, keys, rate
        self.done = threading.Event()
        self.sent = 0

    def run(self) -> None:
        step = 0.05
        per_step = max(1, int(self.rate * step))
        while not self.done.is_set():
            for _ in range(per_step):
                key = f"k{self.sent % self.keys}"
                self.producer.produce(self.topic, key=key, value=json.dumps({"seq": self.sent}))
                self.sent += 1
            self.producer.poll(0)
            self.done.wait(step)
        self.producer.flush(30)


class DrainedGroup(threading.Thread):
    """The job's consumer group kept at the log end of the topic (a job that drains at once):
    the barrier then measures the chain's own cost, not a job's."""

    def __init__(self, admin: Any, group: str, topic: str) -> None:
        super().__init__(name="drained-group", daemon=True)
        self.admin, self.group, self.topic = admin, group, topic
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            try:
                count = self.admin.partition_counts([self.topic])[self.topic]
                highs = self.admin.high_watermarks({self.topic: range(count)})
                self.admin.commit_group_offsets(self.group, highs)
            except Exception as exc:  # noqa: BLE001 - a figure run: say it, go on
                say(f"  (group commit failed: {exc})")
            self.done.wait(0.2)


def timed(result: SizeResult, step: str, call: Any) -> Any:
    started = time.perf_counter()
    out = call()
    result.steps[step] = time.perf_counter() - started
    say(f"  [{result.size}] {step}: {result.steps[step]:.3f}s")
    return out


def run_size(config: dict[str, str], size: int, keys: int, rate: float) -> SizeResult:
    """One expansion size -> 2*size through the chain's step functions (module docstring)."""
    from airflow_samza_expand._kafka.admin import KafkaAdmin
    from airflow_samza_expand._protocol.barrier.evidence import evidence_of
    from airflow_samza_expand._protocol.barrier.step import barrier_poll, grace_until
    from airflow_samza_expand._protocol.ownership import cli_holder
    from airflow_samza_expand._protocol.steps.expand import ExpandRequest, expand
    from airflow_samza_expand._protocol.steps.plan.step import PlanRequest, plan
    from airflow_samza_expand._protocol.steps.write_model import write_job_model
    from airflow_samza_expand.core._clock import parse_iso
    from airflow_samza_expand.core.model import JobModel
    from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

    result = SizeResult(size)
    name = f"scale-{size}-{uuid.uuid4().hex[:6]}"
    topic = f"{name}-in"
    admin = KafkaAdmin(config, timeout_s=60)
    store = KafkaCoordinatorStore(config, name)
    traffic = Traffic(config, topic, keys, rate)
    drained = DrainedGroup(admin, name, topic)
    try:
        admin.ensure_topic(topic, size)
        store.write_job_model(JobModel.initial(name, {topic: size}))
        traffic.start()
        drained.start()
        while traffic.sent < min(keys, 4 * size):  # every partition has records to sample
            time.sleep(0.05)
        holder = cli_holder()
        request = PlanRequest(job_name=name, topics=(topic,), max_partitions=4 * size)
        planned = timed(result, "plan", lambda: plan(store, admin, request, holder))
        eid = planned.expansion_id
        assert eid is not None, planned.message
        timed(result, "expand", lambda: expand(
            admin, store, ExpandRequest(topic, factor=2), expansion_id=eid))  # fmt: skip
        grace_ends = grace_until(store, eid, GRACE_S)
        started = time.monotonic()
        poll_times: list[float] = []
        while True:
            t0 = time.perf_counter()
            poll = barrier_poll(admin, store, expansion_id=eid, group=name,
                                grace_ends=grace_ends, stale_quiet_s=QUIET_S)  # fmt: skip
            poll_times.append(time.perf_counter() - t0)
            if poll.done:
                break
            time.sleep(POLL_S)
        waited = time.monotonic() - started
        began = time.time() - waited
        result.steps["barrier"] = waited
        result.polls = len(poll_times)
        result.poll_s = max(poll_times)
        # the floor: max(grace, last stale placement + quiet) from the barrier's start, no
        # drain (the group is at the log end), one poll interval and one poll
        last = evidence_of(store.get_expansion(eid)).last_stale_at
        quiet_ends = parse_iso(last).timestamp() + QUIET_S if last else 0.0
        floor = max(grace_ends, quiet_ends) - began + POLL_S + result.poll_s
        result.barrier_over_floor = waited / floor
        say(f"  [{size}] barrier: {waited:.3f}s in {result.polls} polls (the slowest "
            f"{result.poll_s:.3f}s), floor {floor:.3f}s")  # fmt: skip
        timed(result, "stop", lambda: stop_step(store, eid))
        timed(result, "write", lambda: write_job_model(admin, store, holder, expansion_id=eid))
        model = store.latest_job_model()
        assert model is not None and model.partition_counts() == {topic: 2 * size}
        result.model_bytes = len(model.to_json().encode())
        record = store.get_expansion(eid)
        assert record is not None
        result.record_bytes = len(record.to_json().encode())
        result.page_ms, result.page_bytes = page(name)
        say(f"  [{size}] job page: {result.page_ms:.0f} ms ({result.page_bytes} bytes)")
        return result
    finally:
        traffic.done.set()
        drained.done.set()
        traffic.join(60)
        drained.join(60)
        store.close()
        admin.close()


def stop_step(store: Any, eid: str) -> None:
    """The stop step of a chain without a job: nothing runs, nothing to stop (recorded)."""
    from airflow_samza_expand._protocol.steps import stop

    decision = stop.request_stop(store, "expansion", expansion_id=eid)
    assert not decision.requested, decision.message
    stop.record_stopped(store, eid, {"stopped": []}, None)


def page(job: str) -> tuple[float, int]:
    """The job page as the api-server builds it (its data function and its HTML), best of 3:
    (milliseconds, bytes of HTML)."""
    from airflow_samza_expand.airflow._ui import data, html
    from airflow_samza_expand.airflow._ui.settings import UiSettings
    from airflow_samza_expand.core._render import render_svg

    best, size = float("inf"), 0
    for _ in range(3):
        started = time.perf_counter()
        snap = data.read_job(UiSettings(discover=False), job)
        svg = render_svg(snap.latest) if html.inline_details(snap.latest) else ""
        text = html.job_page(snap, "", svg)
        best = min(best, time.perf_counter() - started)
        size = len(text.encode())
    return best * 1000, size


def start_kafka(smoke: bool, work: Path) -> tuple[Any, str]:
    """(process to stop or None, bootstrap): KAFKA_BOOTSTRAP_SERVERS, else the three-broker
    cluster (the development broker for --smoke)."""
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if bootstrap:
        return None, bootstrap
    if smoke:
        from airflow_samza_expand._testing.process import DevBrokerProcess

        broker = DevBrokerProcess(log_level="WARNING").start()
        return broker, broker.bootstrap
    from airflow_samza_expand._testing.apache_kafka_cluster import ApacheKafkaCluster

    cluster = ApacheKafkaCluster(work_dir=work / "kafka-cluster", log_level="WARN").start()
    return cluster, cluster.bootstrap


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="8,64,256,512", help="partitions before each growth")
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=500.0, help="records per second")
    parser.add_argument("--jobs", default="", help="sizes run with the jobs too (Spark)")
    parser.add_argument(
        "--job-kinds", default="in-place,in-app", help="in-place (shipped job), in-app (user job)"
    )
    parser.add_argument("--job-rate", type=float, default=100.0, help="records/s with a job")
    parser.add_argument(
        "--job-max-records", type=int, default=0,
        help="the shipped job's --max-records-per-batch (0: no cap): the first batch on vN+1 "
        "then takes at most this many of the records the barrier held back",
    )  # fmt: skip
    parser.add_argument(
        "--job-state-shards", type=int, default=0,
        help="the shipped job's --state-shards (0: its default, state per (task, key)): a "
        "batch then pays Spark's per-group cost at most this many times, not once per key",
    )  # fmt: skip
    parser.add_argument("--smoke", action="store_true", help="CI size: 4 -> 8, 400 keys")
    args = parser.parse_args(argv)
    sizes = [4] if args.smoke else [int(s) for s in args.sizes.split(",") if s]
    keys = 400 if args.smoke else args.keys
    work = Path(tempfile.mkdtemp(prefix="expansion-scale-"))
    # the UI's data function reads the Kafka connection and Airflow's metadata (a fresh home)
    os.environ.setdefault("AIRFLOW_HOME", str(work / "airflow"))
    kafka, bootstrap = start_kafka(args.smoke, work)
    os.environ["AIRFLOW_CONN_KAFKA_DEFAULT"] = json.dumps(
        {"conn_type": "kafka", "extra": {"bootstrap.servers": bootstrap}}
    )
    from airflow_samza_expand._kafka.config import client_config

    config = client_config(bootstrap)
    say(f"work directory {work}; Kafka {bootstrap}")
    if args.jobs:  # Airflow's home and its database before anything imports Airflow
        sys.path.insert(0, str(HERE.parent))
        from _expansion_scale_jobs import prepare_airflow

        prepare_airflow(work, bootstrap)
    results, jobs = [], []
    try:
        for size in sizes:
            say(f"[{size}] {size} -> {2 * size} partitions, {keys} keys at {args.rate:.0f}/s")
            results.append(run_size(config, size, keys, args.rate))
            say(results[-1].line())
        if args.jobs:
            jobs = run_jobs(bootstrap, work, [int(n) for n in args.jobs.split(",")], keys, args)
    finally:
        if kafka is not None:
            kafka.close()
    over = [r.barrier_over_floor for r in results] + [j["barrier_over_floor"] for j in jobs]
    plan_s = [r.steps["plan"] for r in results] + [j["steps"].get("plan") or 0 for j in jobs]
    pages = [r.page_ms for r in results] + [j["page_ms"] for j in jobs]

    def ratio(kind: str) -> str:
        found = [j["ratio"] for j in jobs if j["kind"] == kind and j["ratio"] is not None]
        return f"{max(found):.3f}" if found else "n/a"

    say(
        f"sizes={','.join(str(r.size) for r in results)} "
        f"barrier_over_floor_max={max(over, default=float('nan')):.2f} "
        f"plan_s_max={max(plan_s, default=float('nan')):.2f} "
        f"ratio_in_place_max={ratio('in-place')} ratio_in_app_max={ratio('in-app')} "
        f"page_ms_max={max(pages, default=float('nan')):.0f}"
    )
    return 0 if all(j["exact"] and j["state"] == "success" for j in jobs) else 1


def run_jobs(bootstrap: str, work: Path, sizes: list[int], keys: int, args: Any) -> list[dict]:
    """`_expansion_scale_jobs.run_job` per size, the shipped job in place then the user job
    in-app; a run that fails is its line, not the end."""
    from _expansion_scale_jobs import job_line, run_job

    shipped_args: tuple[str, ...] = ()
    if args.job_max_records > 0:
        shipped_args += ("--max-records-per-batch", str(args.job_max_records))
    if args.job_state_shards > 0:
        shipped_args += ("--state-shards", str(args.job_state_shards))
    jobs = []
    for size in sizes:
        for kind in args.job_kinds.split(","):
            say(f"[{kind} {size}] {size} -> {2 * size} partitions, {keys} keys, a job running")
            try:
                jobs.append(run_job(bootstrap, work, size, kind, keys, args.job_rate, say,
                                    shipped_args=shipped_args))  # fmt: skip
                say(job_line(jobs[-1]))
            except Exception as exc:  # noqa: BLE001 - a figure run: the next size goes on
                say(f"job={kind} size={size} failed: {exc!r}")
    return jobs


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
