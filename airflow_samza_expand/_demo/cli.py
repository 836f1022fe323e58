"""``samza-expand demo``: the whole expansion on an embedded stack - development Kafka broker
(subprocess; ``--kafka apache``: Apache Kafka from Maven Central), local Spark (``--spark
standalone``: a standalone master + worker from pyspark), Airflow in a temporary home - under
live keyed traffic.

Prints a progress line per step, then the report (mapping before/after, the partitions ->
buckets -> tasks diagram, per-step timings, the verification verdict, the downtime vs plain
restart ratio and the barrier wait vs grace + drain + poll). Writes ``report.json`` and
``buckets.svg`` into ``--output-dir``. ``--json`` prints the report JSON only.
Nothing here imports Airflow at module level (it needs its temporary home first).
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from airflow_samza_expand.core._modes import Restart, RunMode

# `samza-expand demo --help`: the docstring without its note for contributors (last line)
DESCRIPTION = (__doc__ or "").split("Nothing here imports")[0].rstrip() + "\n"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "demo",
        help="run the expansion 2 -> 4 -> 8 on an embedded stack under live traffic",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--output-dir", default=None, help="where report.json and buckets.svg go "
                   "(default ./samza-expand-demo-<time>)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the report JSON only")
    p.add_argument("--run-mode", choices=RunMode.values(), default=RunMode.CONTINUOUS.value)
    p.add_argument("--port", type=int, default=0, help="broker port (default: a free one)")
    p.add_argument("--bootstrap-servers", default=None,
                   help="use this Kafka instead of starting one (wins over --kafka)")  # fmt: skip
    p.add_argument("--kafka", choices=["dev", "apache", "apache-cluster"], default="dev",
                   help="Kafka to start: dev (development broker, default), apache (Apache "
                   "Kafka fetched with Maven into ~/.cache/airflow-samza-expand) or "
                   "apache-cluster (three Apache Kafka nodes: replication 3, "
                   "min.insync.replicas 2)")  # fmt: skip
    p.add_argument("--spark", choices=["local", "standalone"], default="local",
                   help="Spark master: local (local[2], default) or standalone (a master and one "
                   "worker started from pyspark on 127.0.0.1)")  # fmt: skip
    p.add_argument("--keys", type=int, default=40, help="producer keys (default 40)")
    p.add_argument("--rate", type=float, default=60.0, help="records per second (default 60)")
    p.add_argument("--grace", type=float, default=4.0,
                   help="producer refresh grace in s (producers refresh every 1 s)")  # fmt: skip
    p.add_argument("--restart", choices=Restart.values(), default=None,
                   help="the DAG's restart of the job: in-place (default in continuous mode: the "
                   "running job switches at a batch boundary), in-app (the job restarts its own "
                   "query), task (stop, then the restart task starts the job), warm (a standby "
                   "takes over), cold (stop, then start) or auto (the best the job advertises); "
                   "the default is warm for --naive and available-now")  # fmt: skip
    p.add_argument("--naive", action="store_true",
                   help="write plain GroupByPartition job models: the check must FAIL")  # fmt: skip
    p.add_argument("--stale-producer-refresh-ms", type=int, default=None, metavar="MS",
                   help="also run a producer refreshing its metadata every MS ms (negative "
                   "control: its stale placements are counted; report.json 'order')")  # fmt: skip
    p.set_defaults(func=run)


def restart_task(scenario: Any) -> Any:
    """``--restart task``: the user's "start vN+1" task of the demo, a ``PythonOperator``
    launching the job (as a ``KubernetesPodOperator`` or a deploy script would). The task may
    run in a process of its own: it leaves the launch's handle in a file the demo then takes
    (`take_restart_task_launch`), so the demo stops and reads the job it started."""
    from airflow.providers.standard.operators.python import PythonOperator

    def start_job() -> None:
        _launch_file(scenario).write_text(json.dumps(scenario.job.launch()))

    return PythonOperator(task_id="start_job", python_callable=start_job)


def _launch_file(scenario: Any) -> Path:
    return Path(scenario.cfg.work_dir) / "restart-task-launch.json"


def take_restart_task_launch(scenario: Any) -> None:
    """The job the restart task launched (if it ran) becomes the demo's job."""
    launched = _launch_file(scenario)
    if launched.exists():
        scenario.job.handle = json.loads(launched.read_text())
        launched.unlink()


def default_restart(run_mode: str, naive: bool) -> Restart:
    """The demo's restart: the switch in place for the shipped job running continuously; the
    warm restart for an available-now job (nothing runs to switch) and the naive models (they
    move SSPs between tasks, which a running query cannot take)."""
    return Restart.IN_PLACE if run_mode == RunMode.CONTINUOUS and not naive else Restart.WARM


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


class Progress:
    """``[ 3/12] starting the job on v1 ... done (12.3s)`` lines, timed per step."""

    def __init__(self, out: TextIO, total: int) -> None:
        self.out, self.total, self.n = out, total, 0
        self.seconds: dict[str, float] = {}

    def step(self, title: str) -> _Step:
        self.n += 1
        return _Step(self, f"[{self.n:>2}/{self.total}] {title}", title)

    def line(self, text: str) -> None:
        print(text, file=self.out, flush=True)


class _Step:
    def __init__(self, progress: Progress, label: str, key: str) -> None:
        self.progress, self.label, self.key = progress, label, key

    def __enter__(self) -> _Step:
        self.started = time.monotonic()
        self.progress.line(f"{self.label} ...")
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        seconds = time.monotonic() - self.started
        self.progress.seconds[self.key] = round(seconds, 3)
        status = "done" if exc_type is None else f"FAILED ({exc_type.__name__}: {exc})"
        self.progress.line(f"{self.label} ... {status} ({seconds:.1f}s)")


def run(args: argparse.Namespace) -> int:
    from airflow_samza_expand._demo.scenario_config import env_problems

    problems = env_problems()
    if problems:
        return _fail("; ".join(problems))
    if args.port and not args.bootstrap_servers and _port_in_use(args.port):
        return _fail(
            f"port {args.port} is in use - pick another --port, or leave it out to use a free one"
        )
    if args.stale_producer_refresh_ms is not None and args.stale_producer_refresh_ms <= 0:
        return _fail("--stale-producer-refresh-ms must be > 0 (milliseconds)")
    if args.keys <= 0 or args.rate <= 0 or args.grace < 1.5:
        return _fail(
            "--keys and --rate must be > 0 and --grace >= 1.5 (producers refresh every 1 s)"
        )
    out_dir = Path(args.output_dir or f"samza-expand-demo-{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _fail(f"cannot create --output-dir {out_dir}: {exc} - give a writable directory")
    work = Path(tempfile.mkdtemp(prefix="samza-expand-demo-"))
    stream = sys.stderr if args.json else sys.stdout
    total = (10 if args.run_mode == "continuous" else 9) + (args.spark == "standalone")
    progress = Progress(stream, total=total)
    try:
        return _run(args, out_dir, work, progress)
    except KeyboardInterrupt:
        progress.line("interrupted")
        return 130


def _run(args: argparse.Namespace, out_dir: Path, work: Path, progress: Progress) -> int:
    import logging

    from airflow_samza_expand._demo import airflow_home
    from airflow_samza_expand._demo.jobs import spark_connection_env, spark_env

    started = time.monotonic()
    broker: Any = None
    cluster: Any = None
    scenario = None
    log_file = open(out_dir / "demo.log", "w", encoding="utf-8")  # noqa: SIM115 - closed below
    logging.basicConfig(level=logging.INFO, stream=log_file, force=True)
    try:
        kafka_name = {"apache": "Apache Kafka",
                      "apache-cluster": "a three-node Apache Kafka cluster"}.get(
            args.kafka, "the development Kafka broker")  # fmt: skip
        with progress.step(f"starting {kafka_name}" if not args.bootstrap_servers
                           else "using the given Kafka"):  # fmt: skip
            broker, bootstrap = _start_kafka(args, work)
            progress.line(f"        Kafka at {bootstrap}")
        import os

        os.environ["PATH"] = spark_env()["PATH"]
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # driver and UI on loopback
        master = "local[2]"
        if args.spark == "standalone":
            with progress.step("starting a Spark standalone master and worker"):
                from airflow_samza_expand._testing.spark_standalone import SparkStandalone

                cluster = SparkStandalone(work_dir=work / "spark").start()
                master = cluster.master_url
                progress.line(f"        Spark master {master}, web UI {cluster.master_web_url}")
        airflow_home.prepare(
            work / "airflow",
            {
                "kafka_default": json.dumps(
                    {"conn_type": "kafka", "extra": {"bootstrap.servers": bootstrap}}
                ),
                "spark_default": spark_connection_env(master),
            },
        )
        migration = _Background(airflow_home.migrate)
        from airflow_samza_expand._demo.scenario import Scenario, ScenarioConfig

        cfg = ScenarioConfig(
            bootstrap=bootstrap,
            work_dir=work / "job",
            run_mode=args.run_mode,
            keys=args.keys,
            rate=args.rate,
            grace_s=args.grace,
            naive=args.naive,
            master=master,
            restart=args.restart or default_restart(args.run_mode, args.naive),
        )
        if cfg.restart == "task":  # the user's "start vN+1": here, a task launching the job
            cfg.restart_task = lambda job_name: restart_task(scenario)

        def task_progress(task_id: str, event: str) -> None:
            if event != "start":
                progress.line(f"        task {task_id}: {event}")

        scenario = Scenario(
            cfg,
            run_dag=lambda dag, **kw: _quiet(airflow_home.run_dag, dag, log_file, **kw),
            task_states=airflow_home.task_states,
            xcom=airflow_home.xcom,
            log=lambda line: progress.line(f"        {line}"),
        )
        with progress.step("creating topics, job model v1 and the keyed producer"):
            scenario.setup()
            scenario.start_producer()
            if args.stale_producer_refresh_ms:
                from airflow_samza_expand._demo.stale import add_stale_producer

                add_stale_producer(scenario, args.stale_producer_refresh_ms)
        mode = "continuous" if args.run_mode == "continuous" else "available-now run"
        with progress.step(f"starting the PySpark job on job model v1 ({mode}, {master})"):
            scenario.start_job()
        if args.run_mode == "continuous":
            with progress.step("measuring a plain restart of the job (stop -> first batch)"):
                scenario.measure_plain_restart()
        with progress.step("preparing Airflow (temporary home, airflow db migrate)"):
            migration.wait()
        # The naive model is a plain-grouper model: no expansion plans on it, so one is shown.
        steps = ((2, 4),) if args.naive else ((2, 4), (4, 8))
        for before, after in steps:
            with progress.step(f"expansion DAG: {before} -> {after} partitions"):
                outcome = scenario.expand(on_task=task_progress)
                take_restart_task_launch(scenario)
                if outcome.state != "success":
                    raise RuntimeError(f"DAG run {outcome.state}: {outcome.tasks}")
        with progress.step("stopping the producer, draining the job, verifying"):
            verification = scenario.finish(expected_versions=list(range(1, len(steps) + 2)))
            from airflow_samza_expand._demo.stale import order_counts

            order = order_counts(scenario)  # stale placements before/after snapshots
            from airflow_samza_expand._demo.latency import moved_key_latencies

            scenario.latencies = moved_key_latencies(scenario)
        with progress.step("writing report.json and buckets.svg"):
            from airflow_samza_expand._demo.report import build_report, render_text
            from airflow_samza_expand.core._render import render_svg

            report = build_report(
                scenario=scenario,
                verification=verification,
                total_s=time.monotonic() - started,
                step_seconds=progress.seconds,
            )
            report["order"] = order
            (out_dir / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True))
            (out_dir / "buckets.svg").write_text(render_svg(scenario.models[-1]))
        if args.json:
            print(json.dumps(report, indent=2, sort_keys=True))
        else:
            print(render_text(report, scenario.models))
            print(order["line"])
            print(f"Report: {out_dir / 'report.json'}; diagram: {out_dir / 'buckets.svg'}")
        return 0 if report["verification"]["ok"] else 1
    except Exception as exc:  # noqa: BLE001 - report any failure with where to look
        progress.line(
            f"error: {type(exc).__name__}: {exc} - logs in {out_dir / 'demo.log'}, {work}"
        )
        return 1
    finally:
        if scenario is not None:
            scenario.close()
        if cluster is not None:
            cluster.close()
        if broker is not None:
            broker.close()
        log_file.close()


def _start_kafka(args: argparse.Namespace, work: Path) -> tuple[Any, str]:
    """(process or None, bootstrap servers): --bootstrap-servers, else the chosen broker."""
    if args.bootstrap_servers:
        return None, args.bootstrap_servers
    if args.kafka == "apache":
        from airflow_samza_expand._testing import ApacheKafkaProcess

        kafka = ApacheKafkaProcess(port=args.port, log_path=work / "kafka.log").start()
        return kafka, kafka.bootstrap
    if args.kafka == "apache-cluster":
        from airflow_samza_expand._testing.apache_kafka_cluster import ApacheKafkaCluster

        if args.port:
            raise SystemExit("--port names one broker; --kafka apache-cluster picks free ports")
        nodes = ApacheKafkaCluster(work_dir=work / "kafka-cluster", log_level="WARN").start()
        return nodes, nodes.bootstrap
    from airflow_samza_expand._testing import DevBrokerProcess

    broker = DevBrokerProcess(port=args.port, log_path=work / "broker.log").start()
    return broker, broker.bootstrap


class _Background:
    """Runs ``fn`` in a thread; ``wait()`` re-raises its error."""

    def __init__(self, fn: Any) -> None:
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.thread.start()

    def _run(self, fn: Any) -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - handed to wait()
            self.error = exc

    def wait(self) -> None:
        self.thread.join()
        if self.error is not None:
            raise self.error


def _quiet(fn: Any, dag: Any, log_file: TextIO, **kwargs: Any) -> Any:
    """Run ``fn(dag, **kwargs)`` with stdout (Airflow's task logs) going to the demo log."""
    import contextlib

    with contextlib.redirect_stdout(log_file):
        return fn(dag, **kwargs)
