"""A stand-in for ``spark-submit`` in the UI's live-expansion test: a processor of the job in plain
Python (no Spark) that really reads its input through confluent-kafka and lags.

``python throttled_job.py --job-name J --bootstrap-servers B [--standby --job-model-version N]``
(the arguments of `stream_job_args`; the rest of the shipped job's flags are ignored):

* as the running job (no ``--standby``): reads exactly the newest job model's partitions
  (``assign``, never subscribe), at most ``$THROTTLED_JOB_RECORDS_PER_S`` records a second
  (default 20: the job lags behind a burst), commits its position to the group ``<job>`` every
  0.2 s, heartbeats ``running`` with the ``standby`` capability (the DAG picks a warm
  handover) until a stop request for its version, then commits, heartbeats ``stopped`` and exits;
* with ``--standby --job-model-version N``: heartbeats ``starting`` (role standby) for
  ``$THROTTLED_JOB_WARM_S`` (default 1) and until the file ``$THROTTLED_JOB_WARM_GATE`` exists
  (when set: the test says when the warm-up ends), then ``standby`` until job model vN exists,
  then runs vN as above.

SIGTERM ends a running job as a crash does: it heartbeats ``failed`` and exits (143).
Every launch appends ``{"pid", "argv"}`` to ``$THROTTLED_JOB_LAUNCHES`` (when set) so the test
can stop what the DAG launched; ``$THROTTLED_JOB_RUN_S`` (default 300) bounds its life.
Its log (stdout) says what it does: the page's job log shows it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def _arg(argv: list[str], name: str, default: str | None = None) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else default


def say(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", flush=True)


def _terminated(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds: the running job says "failed", as a crash does


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, _terminated)
    launches = os.environ.get("THROTTLED_JOB_LAUNCHES")
    if launches:
        with open(launches, "a", encoding="utf-8") as out:
            out.write(json.dumps({"pid": os.getpid(), "argv": argv}) + "\n")
    job, bootstrap = _arg(argv, "--job-name"), _arg(argv, "--bootstrap-servers")
    if not job or not bootstrap:
        say("no --job-name/--bootstrap-servers: nothing to run")
        return 2
    from airflow_samza_expand._kafka.config import client_config
    from airflow_samza_expand.store import open_store

    config = client_config(bootstrap)
    store = open_store(_arg(argv, "--coordinator", "kafka") or "kafka", job, config)
    deadline = time.monotonic() + float(os.environ.get("THROTTLED_JOB_RUN_S", "300"))
    pid = f"py-{os.getpid()}"
    try:
        if "--standby" in argv:
            wanted = int(_arg(argv, "--job-model-version", "0") or 0)
            _stand_by(store, pid, wanted, deadline)
        _run(store, config, job, pid, deadline)
    finally:
        store.close()
    return 0


def _stand_by(store, pid: str, wanted: int, deadline: float) -> None:
    say(f"standby {pid}: warming up for job model v{wanted}")
    warm_until = time.monotonic() + float(os.environ.get("THROTTLED_JOB_WARM_S", "1"))
    gate = os.environ.get("THROTTLED_JOB_WARM_GATE")
    while time.monotonic() < deadline and (
        time.monotonic() < warm_until or (gate and not os.path.exists(gate))
    ):
        store.heartbeat(pid, wanted, "starting", role="standby", ttl_s=30, capabilities=["standby"])
        time.sleep(0.3)
    say(f"standby {pid}: warm, waiting for job model v{wanted}")
    while time.monotonic() < deadline and store.latest_job_model().version < wanted:
        store.heartbeat(pid, wanted, "standby", role="standby", ttl_s=30, capabilities=["standby"])
        time.sleep(0.3)
    say(f"standby {pid}: job model v{wanted} written, taking over")


def _run(store, config, job: str, pid: str, deadline: float) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    model = store.latest_job_model()
    version = model.version
    counts = model.partition_counts()
    consumer = Consumer(
        {**config, "group.id": job, "enable.auto.commit": "false", "auto.offset.reset": "earliest"}
    )
    wanted = [TopicPartition(t, p) for t, n in sorted(counts.items()) for p in range(n)]
    committed = consumer.committed(wanted, timeout=30)
    consumer.assign(
        [TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
         for tp in committed]
    )  # fmt: skip
    say(f"processor {pid}: running job model v{version}, reading {counts}")
    pause = 1.0 / float(os.environ.get("THROTTLED_JOB_RECORDS_PER_S", "20"))
    positions: dict[tuple[str, int], int] = {}
    done: dict[tuple[str, int], int] = {}
    next_beat = next_commit = 0.0
    read = 0
    try:
        while time.monotonic() < deadline:
            now = time.monotonic()
            if now >= next_commit:
                if positions != done:
                    offsets = [TopicPartition(t, p, o) for (t, p), o in sorted(positions.items())]
                    consumer.commit(offsets=offsets, asynchronous=False)
                    done = dict(positions)
                    say(f"processor {pid}: committed group {job} at {_show(done)} ({read} read)")
                next_commit = now + 0.2
            if now >= next_beat:
                store.heartbeat(pid, version, "running", ttl_s=30, capabilities=["standby"])
                stop = store.stop_request()
                if stop and int(stop["version"]) >= version:
                    say(f"processor {pid}: stop requested ({stop.get('reason')}), stopping")
                    break
                next_beat = now + 0.5
            msg = consumer.poll(0.05)
            if msg is None or msg.error():
                continue
            positions[(msg.topic(), msg.partition())] = msg.offset() + 1
            read += 1
            time.sleep(pause)
        if positions != done:
            offsets = [TopicPartition(t, p, o) for (t, p), o in sorted(positions.items())]
            consumer.commit(offsets=offsets, asynchronous=False)
        say(f"processor {pid}: stopped at {_show(positions)} after {read} records")
        store.heartbeat(pid, version, "stopped", ttl_s=30, capabilities=["standby"])
    except BaseException as exc:  # killed or crashed: the shipped job heartbeats "failed" too
        say(f"processor {pid}: failed ({type(exc).__name__}: {exc})")
        store.heartbeat(pid, version, "failed", ttl_s=30, capabilities=["standby"])
        raise
    finally:
        consumer.close()


def _show(positions: dict[tuple[str, int], int]) -> str:
    return ", ".join(f"{t}[{p}]={o}" for (t, p), o in sorted(positions.items()))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
