"""The jobs of `expansion_scale.py --jobs`: the factory DAG's expansion (``dag.test()``, real
Airflow on SQLite) of a topic of N partitions grown x2, with a job running under keyed
traffic - the shipped job switching in place, or the example user job (`examples/user_job.py`,
Spark's own Kafka source) restarting its query in-app. Per run: seconds per step (the report's
``seconds_per_step``), the barrier's wait over its floor (max(grace, last stale placement +
quiet) + drain + one poll), the switch's downtime against a cold restart of the same job, the
moved keys' first-record-to-processed latency over the grace, exact counts, the sizes and the
job page (`expansion_scale.page`)."""

from __future__ import annotations

import json
import re
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
USER_JOB = str(ROOT / "airflow_samza_expand" / "examples" / "user_job.py")
GRACE_S = 3.0
POLL_S = 0.5


def prepare_airflow(work: Path, bootstrap: str) -> None:
    """A throwaway Airflow home with kafka_default and spark_default (local[2]), migrated."""
    from fault_matrix import prepare_airflow as prepare

    prepare(work, bootstrap)


def sized_setup(s: Any, partitions: int) -> None:
    """`Scenario.setup` for an input topic of ``partitions`` (job model v1 with them)."""
    from airflow_samza_expand.core.model import JobModel
    from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

    s.admin.ensure_topic(s.topic, partitions)
    s.admin.ensure_topic(s.output_topic, 1)
    s.store = KafkaCoordinatorStore(s.config, s.job_name)
    s.store.write_job_model(JobModel.initial(s.job_name, {s.topic: partitions}))
    s.job = s._stream_job(s.args())


def floor_s(record: Any, drain_s: float | None) -> float:
    """The barrier's floor: max(grace, last stale placement + quiet) from the expand step's
    end, + the drain after the snapshot, + one poll interval."""
    from airflow_samza_expand._protocol.barrier.evidence import evidence_of
    from airflow_samza_expand.core._clock import parse_iso

    expanded = parse_iso(record.steps["expand"].ended_at).timestamp()
    last = evidence_of(record).last_stale_at
    quiet = parse_iso(last).timestamp() + GRACE_S - expanded if last else 0.0
    return max(GRACE_S, quiet) + (drain_s or 0.0) + POLL_S


def barrier_s(steps: dict[str, float | None]) -> float:
    """The barrier task's seconds: its grace and snapshot, and its drain (the report's
    ``barrier (grace and snapshot)`` and ``barrier (drain)``)."""
    return sum(v or 0.0 for k, v in steps.items() if k.startswith("barrier"))


# the job takes vN+1 on: the reader planned a batch on it (in place), or the query was started
# again on it (in-app) - `spark._in_place`, `spark._in_app`
TAKE_ON = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*(?:reads job model v\d+ now \(in place\)|"
    r"restarted its query on job model v\d+)",
    re.M,
)


def switch_downtime(text: str, written_at: float, steady: int = 10) -> float | None:
    """The switch's own downtime, from the job's log ``text``: the gap from its last committed
    batch before it took vN+1 on (`TAKE_ON`, after ``written_at``) to its first batch on vN+1,
    less its median gap between batches before the write (the trigger's cadence). The demo's
    figure (``three_batches_s``) is the longest gap up to the third batch after the switch was
    decided: it also counts the grown topic's slower steady batches (64 -> 128 in-app: the
    restarted query's first batch came one cadence after the stop, its next two took 66-68 s
    against 17-23 s before, with Spark's Kafka source logging its consumer pool past its soft
    maximum of 64) - throughput at the new size, not the switch."""
    from airflow_samza_expand._demo.latency import _log_time, commit_times

    commits = sorted(commit_times(text))
    taken = [t for m in TAKE_ON.finditer(text) if (t := _log_time(m[1])) >= written_at - 0.01]
    before = [t for t in commits if t < written_at][-(steady + 1) :]
    if not taken or len(before) < 2:
        return None
    last = [t for t in commits if t <= taken[0]]
    first = [t for t in commits if t > taken[0]]
    if not last or not first:
        return None
    cadence = statistics.median(b - a for a, b in zip(before, before[1:], strict=False))
    return round(max(0.0, first[0] - last[-1] - cadence), 3)


def first_batch_after_take_on(s: Any, progress: Path) -> dict[str, int] | None:
    """Spark's durations (ms) of the job's first batch on vN+1 and the batch before it (keys
    ``<part>`` and ``before_<part>``), from its ``--progress-file``; None without both."""
    if not progress.exists():
        return None
    from airflow_samza_expand._demo.latency import _log_time

    taken = [_log_time(m[1]) for m in TAKE_ON.finditer(Path(s.job.handle["log_path"]).read_text(
        errors="replace"))]  # fmt: skip
    reports = [json.loads(line) for line in progress.read_text().splitlines() if line.strip()]
    if not taken or not reports:
        return None
    from airflow_samza_expand.core._clock import parse_iso

    # the reader takes vN+1 on while it plans a batch: the last one started before that
    started = [parse_iso(r["timestamp"]).timestamp() for r in reports]
    planned = [i for i, t in enumerate(started) if t <= taken[0]]
    if not planned or planned[-1] == 0:
        return None
    first, before = reports[planned[-1]], reports[planned[-1] - 1]
    return {**{f"before_{k}": v for k, v in before["durationMs"].items()},
            **first["durationMs"], "rows": first["numInputRows"]}  # fmt: skip


def job_switch_downtime(s: Any, record: Any) -> float | None:
    """`switch_downtime` of ``s``'s running job for the expansion ``record`` (None without a
    write step)."""
    from airflow_samza_expand.core._clock import parse_iso

    write = record.steps.get("write")
    if write is None or not (write.started_at or write.ended_at):
        return None
    written_at = parse_iso(write.started_at or write.ended_at).timestamp()
    return switch_downtime(Path(s.job.handle["log_path"]).read_text(errors="replace"), written_at)


def run_job(bootstrap: str, work: Path, size: int, kind: str, keys: int, rate: float,
            say: Any, shipped_args: tuple[str, ...] = ()) -> dict[str, Any]:  # fmt: skip
    """One expansion ``size`` -> 2*size with the ``kind`` job ("in-place": the shipped job,
    with ``shipped_args`` - its batch cap, its state layout -; "in-app": the example user
    job)."""
    from expansion_scale import page

    from airflow_samza_expand._demo import airflow_home
    from airflow_samza_expand._demo.jobs import measure_restart
    from airflow_samza_expand._demo.latency import moved_key_latencies
    from airflow_samza_expand._demo.scenario import Scenario
    from airflow_samza_expand._demo.scenario_config import ScenarioConfig

    own: dict[str, Any] = {}
    progress = work / f"{kind}-{size}-progress.jsonl"
    if kind == "in-place":  # Spark's durations per batch: where the first batch on vN+1 goes
        own = {"application_args": (*shipped_args, "--progress-file", str(progress))}
    if kind == "in-app":
        # Spark's Kafka source keeps a consumer per partition and executor in a pool of 64 by
        # default and opens consumers again past it (docs/own-job.md)
        own = {"application": USER_JOB, "application_args": ("--source", "kafka"),
               "spark_conf": {"spark.kafka.consumer.cache.capacity": str(4 * size)}}  # fmt: skip
    cfg = ScenarioConfig(
        bootstrap=bootstrap, work_dir=work / f"{kind}-{size}", restart="auto", keys=keys,
        rate=rate, grace_s=GRACE_S, poll_s=POLL_S, trigger="processing-time=1s",
        name=f"scale-{kind}-{size}-{uuid.uuid4().hex[:6]}", **own,
    )  # fmt: skip
    s = Scenario(cfg, run_dag=airflow_home.run_dag, task_states=airflow_home.task_states,
                 xcom=airflow_home.xcom,
                 log=lambda line: say(f"  [{kind} {size}] {line}"))  # fmt: skip
    try:
        sized_setup(s, size)
        s.start_producer()
        s.start_job()
        started = time.monotonic()
        outcome = s.expand()
        say(f"  [{kind} {size}] expansion {outcome.state} in {time.monotonic() - started:.1f}s "
            f"({outcome.restart})")  # fmt: skip
        record = s.store.expansions()[0]
        downtime = job_switch_downtime(s, record) if outcome.state == "success" else None
        first_on_new = first_batch_after_take_on(s, progress)
        # the cold restart after the expansion (on vN+1): measured before it, its backlog
        # would be the barrier's drain
        cold = measure_restart(s.job, s.store, s.admin, topic=s.topic, version=2, log=s.log)
        steps = dict((outcome.summary or {}).get("seconds_per_step") or {})
        floor = floor_s(record, outcome.probe.get("drain_s"))
        verification = s.finish(expected_versions=[1, 2])
        latency = moved_key_latencies(s)[0]
        model = s.store.latest_job_model()
        page_ms, page_bytes = page(s.job_name)
        return {
            "kind": kind, "size": size, "state": outcome.state, "restart": outcome.restart,
            "steps": steps, "barrier_over_floor": barrier_s(steps) / floor, "floor_s": floor,
            "downtime_s": downtime, "cold_s": cold,
            "three_batches_s": outcome.probe.get("downtime_s"),
            "ratio": None if downtime is None else downtime / cold,
            "latency_over_grace": None if latency.max_s is None else latency.max_s / GRACE_S,
            "exact": verification.ok, "model_bytes": len(model.to_json().encode()),
            "record_bytes": len(record.to_json().encode()), "page_ms": page_ms,
            "page_bytes": page_bytes, "first_batch_ms": first_on_new,
        }  # fmt: skip
    finally:
        s.close()


def job_line(r: dict[str, Any]) -> str:
    """One line per job run."""
    steps = " ".join(
        f"{k.replace(' ', '_').replace('(', '').replace(')', '')}_s={v:.2f}"
        for k, v in sorted(r["steps"].items())
        if v is not None
    )

    def f(x: float | None, fmt: str = ".3f") -> str:
        return "n/a" if x is None else format(x, fmt)

    return (
        f"job={r['kind']} size={r['size']}->{2 * r['size']} state={r['state']} "
        f"restart={r['restart']} {steps} barrier_over_floor={r['barrier_over_floor']:.2f} "
        f"barrier_floor_s={r.get('floor_s', 0.0):.2f} "
        f"downtime_s={f(r['downtime_s'])} three_batches_s={f(r.get('three_batches_s'))} "
        f"cold_restart_s={r['cold_s']:.2f} "
        f"ratio={f(r['ratio'])} moved_latency_over_grace={f(r['latency_over_grace'], '.2f')} "
        f"exact={r['exact']} model_bytes={r['model_bytes']} record_bytes={r['record_bytes']} "
        f"page_ms={r['page_ms']:.0f}"
        + (f" first_batch_ms={json.dumps(r['first_batch_ms'], sort_keys=True)}"
           if r.get("first_batch_ms") else "")
    )  # fmt: skip
