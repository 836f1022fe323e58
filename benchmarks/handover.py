"""Downtime of a restart of the job: warm-standby handover vs cold restart, and failover.

One job (2 input partitions, steady keyed traffic) on one checkpoint, processors launched as
separate processes (`_testing.processors.JobProcess`, local[2], own JVM each):

* handover (x3): vN runs; a processor for vN+1 is started with ``--standby --job-model-version
  N+1`` and warms up; then the expansion's order of steps: stop vN (it commits its last batch,
  heartbeats ``stopped`` - where the DAG's stop step returns - and releases the lease), write
  vN+1; the standby takes the lease and starts its query.
* cold restart (x3): stop vN, write vN+1, then launch the vN+1 processor (today's restart).
* in place (x3, first): vN runs; vN+1 is written and the running processor switches
  at a batch boundary (it heartbeats ``running`` on vN+1); nothing stops. Its downtime is the
  longest gap between two committed batches from the last one before the write to the third
  after the switch, minus the median gap of the 10 before the write (the trigger's own cadence
  is not downtime; `_demo.latency.switch_downtime_s`, shared with ``samza-expand demo``).
* failover (x3): an active and a hot standby (``--standby``) of the same version; SIGKILL the
  active's process group; the standby takes over when the lease (session) expires.
* in-app (x3), a second job: the example user job (`examples/user_job.py`) on
  Spark's own Kafka source, handing ``job.run`` the function that starts its query. vN+1 is
  written and the running application restarts its query on it (same process, checkpoint and
  lease). Downtime by the in-place rule above; its baseline is a cold restart of that same
  user job (x3, same run): ``ratio_in_app`` = in-app / that cold restart.

Downtime = last committed batch of the old processor -> first committed batch of the new one
(both from the processes' log lines, one clock). Failover = the SIGKILL -> the first committed
batch of the standby. Each figure is the median of 3 in the same run (``--smoke``: 1, at a
CI size). At the end the outputs are checked exact (each key's count = records produced for
it, no order violations).

Uses KAFKA_BOOTSTRAP_SERVERS if set, else starts the development broker. Starts Spark: run it
under ``flock /tmp/spark.lock``. Figures only, but a run whose outputs are not exact fails. Last
line:

    handover_downtime_s=<x> cold_restart_s=<y> ratio=<x/y> failover_s=<z>
    in_place_downtime_s=<w> ratio_in_place=<w/y> in_app_downtime_s=<a> ratio_in_app=<a/c>
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from airflow_samza_expand._demo.jobs import wait_for as demo_wait_for
from airflow_samza_expand._demo.latency import switch_downtime_s
from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand._testing.processors import USER_JOB_PY, JobProcess
from airflow_samza_expand._testing.spark_kafka import connector_jars
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store import open_store

KEYS = [f"key-{i}" for i in range(40)]
WAIT_S = 600.0


def say(text: str) -> None:
    print(f"[handover {time.strftime('%H:%M:%S')}] {text}", flush=True)


def wait_for(what: str, check: Any, timeout_s: float = WAIT_S) -> Any:
    return demo_wait_for(what, check, timeout_s=timeout_s, interval_s=0.1, log=say)


class Traffic(threading.Thread):
    """Steady keyed records with a per-key sequence (value {"seq": n})."""

    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic, self.rate = topic, rate
        self.seqs = {k: 0 for k in KEYS}
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            for key in KEYS:
                value = json.dumps({"seq": self.seqs[key], "key": key}).encode()
                self.producer.produce(self.topic, key=key.encode(), value=value)
                self.seqs[key] += 1
            self.producer.poll(0)
            time.sleep(len(KEYS) / self.rate)
        self.producer.flush(30)


class Bench:
    def __init__(
        self, bootstrap: str, work: Path, ttl_s: float, rate: float, user_job: bool = False
    ) -> None:
        self.bootstrap, self.work, self.ttl_s = bootstrap, work, ttl_s
        self.user_job = user_job  # the example user job on Spark's source (in-app), not ours
        stamp = time.strftime("%H%M%S") + ("-user" if user_job else "")
        self.topic, self.output = f"handover-in-{stamp}", f"handover-out-{stamp}"
        self.name = f"handover-{stamp}"
        admin = KafkaAdmin(client_config(bootstrap))
        admin.ensure_topic(self.topic, 2)
        admin.ensure_topic(self.output, 1)
        admin.close()
        self.coordinator = str(work / "coordinator")
        self.store = open_store(self.coordinator, self.name)
        self.v1 = self.store.write_job_model(JobModel.initial(self.name, {self.topic: 2}))
        self.traffic = Traffic(bootstrap, self.topic, rate)
        self.procs: list[JobProcess] = []
        self.stopped: list[JobProcess] = []
        self.count = 0

    def start(self, *extra: str) -> JobProcess:
        self.count += 1
        pid = f"p{self.count}"
        if self.user_job:
            return self._start_user_job(pid)
        args = [
            "--master", "local[2]", "--job-name", self.name,
            "--bootstrap-servers", self.bootstrap, "--coordinator", self.coordinator,
            "--checkpoint-dir", str(self.work / "checkpoint"), "--output-topic", self.output,
            "--processor-id", pid, "--ttl", str(self.ttl_s), "--trigger", "processing-time=500ms",
            "--shuffle-partitions", "2", "--spark-conf", "spark.ui.enabled=false",
            "--spark-conf", "spark.driver.memory=768m", *extra,
        ]  # fmt: skip
        proc = JobProcess(pid, args, self.work / f"{pid}.log")
        self.procs.append(proc)
        return proc

    def _start_user_job(self, pid: str) -> JobProcess:
        """The example user job: it builds its own session (master, jars by spark-submit's
        environment variable, as a deployment's launcher would give them)."""
        args = [
            "--job-name", self.name, "--bootstrap-servers", self.bootstrap,
            "--coordinator", self.coordinator, "--checkpoint-dir", str(self.work / "checkpoint"),
            "--output-topic", self.output, "--processor-id", pid, "--ttl", str(self.ttl_s),
            "--trigger", "processing-time=500ms", "--shuffle-partitions", "2",
        ]  # fmt: skip
        submit = (
            f"--master local[2] --jars {','.join(connector_jars())} --conf spark.ui.enabled=false "
            "--driver-memory 768m pyspark-shell"
        )
        env = {"PYSPARK_SUBMIT_ARGS": submit}
        proc = JobProcess(pid, args, self.work / f"{pid}.log", USER_JOB_PY, env)
        self.procs.append(proc)
        return proc

    def state(self, proc: JobProcess) -> tuple:
        p = self.store.processors().get(proc.name) or {}
        return p.get("state"), p.get("role"), p.get("job_model_version")

    def committing(self, proc: JobProcess, after: int = 0) -> bool:
        if proc.popen.poll() is not None and proc.expect_running:
            raise RuntimeError(f"{proc.name} exited early:\n{proc.tail()}")
        return len(proc.commit_times()) > after

    def next_version(self) -> JobModel:
        latest = self.store.latest_job_model()
        return dataclasses.replace(self.v1, version=latest.version + 1)

    def stop(self, proc: JobProcess, version: int) -> None:
        """As the DAG's stop step (`_protocol.steps.stop.stop_poll`): request the stop and return at
        the processor's ``stopped`` heartbeat - sent after its last committed batch, just before
        it releases the lease - not at its process exit (checked at the end, `check_exits`)."""
        self.store.request_stop(version, "benchmark")
        proc.expect_running = False
        self.stopped.append(proc)
        wait_for(f"{proc.name} stopped", lambda: self.state(proc)[0] in ("stopped", "failed"))
        if self.state(proc)[0] == "failed":
            raise RuntimeError(f"{proc.name} failed:\n{proc.tail()}")

    def check_exits(self) -> None:
        """Every processor stopped by a stop request exited 0."""
        for proc in self.stopped:
            code = proc.wait(WAIT_S)
            if code != 0:
                raise RuntimeError(f"{proc.name} exited {code}:\n{proc.tail()}")

    def handover(self, active: JobProcess) -> tuple[float, JobProcess]:
        nxt = self.next_version()
        standby = self.start("--standby", "--job-model-version", str(nxt.version))
        wait_for(f"{standby.name} warmed up", lambda: "warmed up" in standby.log_text())
        self.stop(active, nxt.version - 1)
        self.store.write_job_model(nxt)
        wait_for(f"{standby.name} commits", lambda: self.committing(standby))
        return gap(active, standby), standby

    def cold(self, active: JobProcess) -> tuple[float, JobProcess]:
        nxt = self.next_version()
        self.stop(active, nxt.version - 1)
        self.store.write_job_model(nxt)
        new = self.start()
        wait_for(f"{new.name} commits", lambda: self.committing(new))
        return gap(active, new), new

    def in_place(self, active: JobProcess) -> tuple[float, JobProcess]:
        nxt = self.next_version()
        written_at = time.time()
        self.store.write_job_model(nxt)
        wanted = ("running", "active", nxt.version)
        wait_for(f"{active.name} runs v{nxt.version}", lambda: self.state(active) == wanted)
        switched_at = time.time()

        def downtime() -> float | None:
            times = [t.timestamp() for t in active.commit_times()]
            return switch_downtime_s(times, written_at, switched_at)

        wait_for(f"{active.name} commits on", lambda: downtime() is not None)
        return downtime() or 0.0, active

    in_app = in_place  # the same steps and rule: the application restarts its query itself

    def failover(self, active: JobProcess) -> tuple[float, JobProcess]:
        standby = self.start("--standby")
        wait_for(f"{standby.name} warmed up", lambda: "warmed up" in standby.log_text())
        wait_for(f"{active.name} commits again", lambda: self.committing(active, 1))
        from datetime import datetime

        killed = datetime.now()
        active.signal_group(signal.SIGKILL)
        active.expect_running = False
        wait_for(f"{standby.name} takes over", lambda: self.committing(standby))
        return (standby.commit_times()[0] - killed).total_seconds(), standby


def gap(old: JobProcess, new: JobProcess) -> float:
    return (new.commit_times()[0] - old.commit_times()[-1]).total_seconds()


def check_exact(bench: Bench) -> bool:
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bench.bootstrap,
            "group.id": f"verify-{bench.name}",
            "enable.partition.eof": "true",
            "enable.auto.commit": "false",
        }
    )
    consumer.assign([TopicPartition(bench.output, 0, 0)])
    latest: dict[str, dict] = {}
    while True:
        msg = consumer.poll(30)
        if msg is None or (msg.error() and msg.error().code() == KafkaError._PARTITION_EOF):
            break
        latest[msg.key().decode()] = json.loads(msg.value())
    consumer.close()
    counts = {k: v.get("count") for k, v in latest.items()}
    violations = sum(v.get("violations", 0) for v in latest.values())
    return counts == bench.traffic.seqs and violations == 0


def run(
    bootstrap: str,
    work: Path,
    ttl_s: float,
    rate: float,
    rounds: int,
    lead: int = 10,
    kinds: tuple[str, ...] = ("in_place", "handover", "cold", "failover"),
    user_job: bool = False,
) -> dict[str, float]:
    """Median seconds of each kind of restart of one job (``user_job``: the example user job)."""
    work.mkdir(parents=True, exist_ok=True)
    bench = Bench(bootstrap, work, ttl_s, rate, user_job)
    bench.traffic.start()
    try:
        active = bench.start()
        wait_for("the first processor commits", lambda: bench.committing(active))
        figures: dict[str, list[float]] = {kind: [] for kind in kinds}
        wait_for(f"{lead} committed batches", lambda: bench.committing(active, lead + 1))
        for kind in kinds:
            for i in range(rounds):
                wait_for("a committed batch", lambda a=active: bench.committing(a, 1))
                seconds, active = getattr(bench, kind)(active)
                figures[kind].append(seconds)
                say(f"{kind} {i + 1}/{rounds}: {seconds:.2f} s")
        bench.traffic.halt.set()
        bench.traffic.join(60)
        admin = KafkaAdmin(client_config(bootstrap))
        try:
            total = sum(bench.traffic.seqs.values())

            def done() -> bool:
                offsets = admin.committed_offsets(bench.name, bench.topic, [0, 1])
                return sum(o or 0 for o in offsets.values()) >= total

            wait_for("the last records to be committed", done)
        finally:
            admin.close()
        bench.check_exits()
        exact = check_exact(bench)
        say(f"outputs exact: {exact} ({sum(bench.traffic.seqs.values())} records)")
        if not exact:
            raise RuntimeError(f"the outputs of job {bench.name} are not exact")
        say(f"all figures: {json.dumps(figures)}")
        return {k: statistics.median(v) for k, v in figures.items()}
    finally:
        bench.traffic.halt.set()
        for proc in bench.procs:
            proc.stop()
        bench.store.close() if hasattr(bench.store, "close") else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ttl", type=float, default=10.0, help="processor TTL / lease (s)")
    parser.add_argument("--rate", type=float, default=200.0, help="records per second")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="CI size: 1 round of each kind, 40 records/s, 3 batches before the first restart, "
        "6 s TTL (same code and last line, figures not comparable)",
    )
    args = parser.parse_args(argv)
    lead = 10
    if args.smoke:
        args.rounds, args.rate, args.ttl, lead = 1, 40.0, 6.0, 3
    with ExitStack() as stack:
        bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
        if not bootstrap:
            from airflow_samza_expand._testing import DevBrokerProcess

            bootstrap = stack.enter_context(DevBrokerProcess(log_level="WARNING")).bootstrap
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="handover-")))
        med = run(bootstrap, work / "job", args.ttl, args.rate, args.rounds, lead)
        say("the example user job on Spark's own Kafka source: in-app, then cold restarts")
        user = run(bootstrap, work / "user", args.ttl, args.rate, args.rounds, lead,
                   ("in_app", "cold"), user_job=True)  # fmt: skip
    ratio = med["handover"] / med["cold"] if med["cold"] else float("nan")
    in_app = user["in_app"] / user["cold"] if user["cold"] else float("nan")
    print(
        f"handover_downtime_s={med['handover']:.2f} cold_restart_s={med['cold']:.2f} "
        f"ratio={ratio:.2f} failover_s={med['failover']:.2f} "
        f"in_place_downtime_s={med['in_place']:.2f} "
        f"ratio_in_place={med['in_place'] / med['cold'] if med['cold'] else float('nan'):.3f} "
        f"in_app_downtime_s={user['in_app']:.2f} ratio_in_app={in_app:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
