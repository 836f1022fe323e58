"""Spark's own Kafka source (spark-sql-kafka-0-10) for local runs, tests and benchmarks.

pip's pyspark ships without it. ``connector_jars()`` fetches the connector of the installed
pyspark version from Maven Central once (Maven, the pom beside this module, cached in
``~/.cache/airflow-samza-expand``) and returns the jars pyspark lacks, for ``spark-submit
--jars`` or ``spark.jars``; ``samza-expand spark-kafka-jars --fetch-only`` (run by
scripts/setup.sh) fills the cache. On a cluster give spark-submit
``--packages org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version>`` (`maven_coordinate`).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

POM = Path(__file__).resolve().parent / "spark_kafka" / "pom.xml"


def spark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def maven_coordinate(version: str | None = None) -> str:
    """``org.apache.spark:spark-sql-kafka-0-10_2.13:<version>`` (spark-submit ``--packages``)."""
    return f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version or spark_version()}"


def _artifact(name: str) -> str:
    return re.sub(r"-\d[^-]*(-[A-Za-z0-9.]+)?\.jar$", "", name)


def connector_jars() -> list[str]:
    """The connector of the installed pyspark and the jars it needs that pyspark lacks (fetched
    once; RuntimeError naming the fix without Maven)."""
    import pyspark

    from airflow_samza_expand._testing.launch import cache_root, maven_copy, pom_hash

    version = spark_version()
    target = cache_root() / f"spark-sql-kafka-{version}-{pom_hash(POM)}"
    libs = maven_copy(POM, target, properties={"spark.version": version})
    shipped = {_artifact(j.name) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return sorted(str(j) for j in libs.glob("*.jar") if _artifact(j.name) not in shipped)


def run(args: argparse.Namespace) -> int:
    jars = connector_jars()
    if args.fetch_only:
        print(f"Spark Kafka connector {maven_coordinate()}: {len(jars)} jars cached")
    else:
        print(",".join(jars))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "spark-kafka-jars",
        help="fetch Spark's Kafka connector for the installed pyspark; print its jars",
        description=(
            "Fetch spark-sql-kafka-0-10 of the installed pyspark from Maven Central (once, "
            "cached) and print the comma-separated jars for spark-submit --jars. On a cluster "
            f"use --packages {maven_coordinate('<spark version>')} instead."
        ),
    )
    parser.add_argument("--fetch-only", action="store_true", help="fetch, print a summary only")
    parser.set_defaults(func=run)


__all__ = ["POM", "connector_jars", "maven_coordinate", "spark_version"]
