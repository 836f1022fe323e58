"""A class-data-sharing archive of the test Spark driver's JVM classes (JDK CDS, JEP 350).

A Spark driver JVM loads and verifies about ten thousand classes at every start; the suite
starts dozens. `ensure_archive` records the classes a representative run loads - a local[2]
session running the job's stateful plan (`spark._warmup.warm_up_pipeline`: the state store,
``applyInPandasWithState``, ``foreachBatch``, Arrow) - once per machine into a dynamic archive
(``-XX:ArchiveClassesAtExit``) under the cache (`_testing.launch.cache_root`), keyed by the
Spark and Java versions. `scripts/test.sh` then starts every test driver with
``-XX:SharedArchiveFile`` (`jvm_options`): the JVM maps the classes instead of loading them
(about 30% less CPU for a short Spark session on this project's CI machine). An archive that
does not match (another JDK, another classpath) is ignored by the JVM, never an error.

``python -m airflow_samza_expand._testing.spark_cds`` prints the test drivers' JVM options
(`driver_options`: `BASE_OPTIONS`, and the archive's, building it first if needed; without
the archive when it cannot be built - the tests then run without it).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import subprocess
import sys
from pathlib import Path

log = logging.getLogger(__name__)

DUMP_TIMEOUT_S = 300.0
# the test drivers' JIT/GC options: short-lived JVMs, the client JIT only and the serial GC cut
# the CPU of a Spark test by about a quarter (tests/spark/test_spark_job.py: 85 -> 66 CPU-s);
# the dump runs with the same
BASE_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def java_tag() -> str:
    """A short hash of ``java -version`` (the archive is valid for one JDK build only)."""
    out = subprocess.run(
        ["java", "-version"], capture_output=True, text=True, timeout=60, check=True
    )
    return hashlib.sha256((out.stderr + out.stdout).encode()).hexdigest()[:12]


def archive_path() -> Path:
    from airflow_samza_expand._testing.launch import cache_root
    from airflow_samza_expand._testing.spark_kafka import spark_version

    return cache_root() / f"spark-cds-{spark_version()}-{java_tag()}.jsa"


def jvm_options(archive: Path) -> str:
    """Driver JVM options using ``archive``; JVM log lines go to stderr (a mismatch warning
    must never land in a job's stdout)."""
    return f"-XX:SharedArchiveFile={archive} -Xshare:auto -Xlog:disable -Xlog:all=warning:stderr"


def driver_options(archive: Path | None) -> str:
    """`BASE_OPTIONS`, plus `jvm_options` with an archive."""
    return f"{BASE_OPTIONS} {jvm_options(archive)}" if archive else BASE_OPTIONS


def ensure_archive() -> Path | None:
    """The archive, built once (under a lock: concurrent callers wait for the first);
    None when it cannot be built (logged)."""
    path = archive_path()
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            return path
        partial = path.with_suffix(f".{os.getpid()}.partial")
        env = dict(os.environ)
        quiet = "-Xlog:disable -Xlog:all=error:stderr"
        env["SPARK_SUBMIT_OPTS"] = f"{BASE_OPTIONS} -XX:ArchiveClassesAtExit={partial} {quiet}"
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        log_path = path.with_suffix(".log")
        _say(f"recording the Spark driver's classes into {path} (once, about 30 s)")
        with open(log_path, "w") as out:
            done = subprocess.run(
                [sys.executable, "-m", "airflow_samza_expand._testing.spark_cds", "--dump"],
                env=env, stdout=out, stderr=subprocess.STDOUT, timeout=DUMP_TIMEOUT_S,
                check=False,
            )  # fmt: skip
        if done.returncode != 0 or not partial.exists():
            partial.unlink(missing_ok=True)
            _say(f"not built (see {log_path}); Spark starts without it")
            return None
        partial.replace(path)
        for leftover in path.parent.glob(f"{path.stem}.*.partial"):  # a killed build's
            leftover.unlink(missing_ok=True)
    return path


def _say(line: str) -> None:
    print(f"[spark-cds] {line}", file=sys.stderr, flush=True)


def _dump() -> int:
    """The representative run (this process's JVM writes the archive at its exit)."""
    from pyspark.sql import SparkSession

    from airflow_samza_expand.spark._processor import DEFAULT_PROCESSOR
    from airflow_samza_expand.spark._warmup import warm_up_pipeline

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("samza-expand-cds")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    jvm = spark.sparkContext._gateway.proc  # spark-submit exec'ed the driver JVM
    try:
        warm_up_pipeline(spark, DEFAULT_PROCESSOR)
    finally:
        spark.stop()
    jvm.stdin.close()  # the gateway exits on EOF; the JVM writes the archive as it exits
    return jvm.wait(DUMP_TIMEOUT_S)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--dump"]:
        return _dump()
    try:
        path = ensure_archive()
    except (OSError, subprocess.SubprocessError) as exc:
        _say(f"not built: {exc}; Spark starts without it")
        path = None
    print(driver_options(path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
