"""The runtime's pure parts, without Spark or Kafka: the command line with keyword overrides,
Spark's Kafka options from librdkafka settings, the job model's assignment and task mapping,
the end offsets of a progress report."""

from __future__ import annotations

import logging

import pytest

from airflow_samza_expand.core._plan import plan_expansion
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.spark._driving import end_offsets
from airflow_samza_expand.spark._kafka_options import spark_kafka_options
from airflow_samza_expand.spark.runtime import assignment, parse_args, task_of

BASE = ["--job-name", "j", "--bootstrap-servers", "k:9092", "--checkpoint-dir", "/c"]


def test_the_command_line_keeps_the_jobs_own_options_and_keywords_win() -> None:
    args, extra = parse_args([*BASE, "--source", "python", "--standby"], {"output_topic": "o"})
    assert (args.job_name, args.output_topic, args.standby) == ("j", "o", True)
    assert extra == ["--source", "python"]
    args, _ = parse_args(["--bootstrap-servers", "k"], {"job_name": "x", "checkpoint_dir": "/d"})
    assert (args.job_name, args.checkpoint_dir) == ("x", "/d")  # required only on the line
    with pytest.raises(TypeError, match="unknown settings"):
        parse_args(BASE, {"no_such_setting": 1})


def test_librdkafka_settings_become_kafka_options_with_a_jaas_login(caplog) -> None:
    config = {
        "bootstrap.servers": "b:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "u",
        "sasl.password": 'p"w',
        "ssl.ca.location": "/ca.pem",
        "queue.buffering.max.ms": "5",
    }
    with caplog.at_level(logging.WARNING):
        options = spark_kafka_options(config)
    assert options["kafka.bootstrap.servers"] == "b:9093"
    assert options["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert options["kafka.ssl.truststore.location"] == "/ca.pem"
    assert options["kafka.ssl.truststore.type"] == "PEM"
    assert options["kafka.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="u" password="p\\"w";'
    )
    assert "queue.buffering.max.ms" in caplog.text and 'p"w' not in caplog.text


def test_assignment_and_tasks_follow_the_job_model() -> None:
    v1 = JobModel.initial("j", {"orders": 2})
    v2 = plan_expansion(v1, {"orders": 2}, {"orders": 4}).new_job_model
    assert assignment(v2) == {"orders": [0, 1, 2, 3]}
    assert task_of(v2) == {
        "orders:0": "Partition 0",
        "orders:1": "Partition 1",
        "orders:2": "Partition 0",
        "orders:3": "Partition 1",
    }


def test_end_offsets_merge_the_sources_of_the_job_models_topics() -> None:
    sources = [
        {"endOffset": '{"orders":{"0":5,"1":7}}'},  # Spark's Kafka source: a JSON string
        {"endOffset": {"other": {"0": 1}}},  # a source the job model does not read
        {"endOffset": None},
    ]
    assert end_offsets(sources, {"orders": 2}) == {"orders": {"0": 5, "1": 7}}


def test_the_shipped_job_talks_to_its_python_workers_over_unix_sockets() -> None:
    """Spark's loopback TCP to a Python worker stalls each read task on a delayed ACK
    (`spark._python_workers`): the shipped job starts its application with Unix domain
    sockets, and a ``--spark-conf`` of the user's still wins."""
    from airflow_samza_expand.spark._args import build_parser
    from airflow_samza_expand.spark.job import session_conf

    argv = [*BASE, "--shuffle-partitions", "3"]
    conf = session_conf(build_parser().parse_args(argv))
    assert conf["spark.python.unix.domain.socket.enabled"] == "true"
    assert conf["spark.sql.shuffle.partitions"] == "3"
    own = ["--spark-conf", "spark.python.unix.domain.socket.enabled=false"]
    conf = session_conf(build_parser().parse_args([*argv, *own]))
    assert conf["spark.python.unix.domain.socket.enabled"] == "false"


def test_a_session_without_unix_sockets_is_told_how_to_set_them(caplog) -> None:
    """The runtime on the provider's reader warns a user's application started without Unix
    domain sockets (naming the setting), and stays quiet with them or where it cannot tell."""
    from types import SimpleNamespace

    from pyspark import SparkConf

    from airflow_samza_expand.spark._python_workers import warn_without_unix_sockets

    def session(**conf: str) -> SimpleNamespace:
        spark_conf = SparkConf(loadDefaults=False).setAll(list(conf.items()))
        return SimpleNamespace(sparkContext=SimpleNamespace(getConf=lambda: spark_conf))

    with caplog.at_level(logging.WARNING, logger="airflow_samza_expand.spark.runtime"):
        assert warn_without_unix_sockets(session()) is True
        assert "--conf spark.python.unix.domain.socket.enabled=true" in caplog.text
        caplog.clear()
        on = {"spark.python.unix.domain.socket.enabled": "true"}
        assert warn_without_unix_sockets(session(**on)) is False
        assert warn_without_unix_sockets(SimpleNamespace()) is False  # Spark Connect
    assert caplog.text == ""
