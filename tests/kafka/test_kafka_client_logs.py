"""librdkafka's own log lines go through Python logging in every client the package creates."""

from __future__ import annotations

import ast
import logging
import socket
import time
from pathlib import Path

import pytest

import airflow_samza_expand
from airflow_samza_expand._demo.producer import KeyedProducer
from airflow_samza_expand._kafka.admin import KafkaAdmin, KafkaUnavailableError
from airflow_samza_expand._kafka.config import LIBRDKAFKA_LOGGER, client_config
from airflow_samza_expand._kafka.config_file import write_config_file

PACKAGE = Path(airflow_samza_expand.__file__).parent
CLIENTS = {"Producer", "Consumer", "AdminClient"}


def _direct_client_imports() -> list[str]:
    """`module:line name` of every import of (or attribute access to) a confluent-kafka client
    class outside _kafka/clients.py."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "_kafka" / "clients.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("confluent_"):
                names = {alias.name for alias in node.names} & CLIENTS
            elif isinstance(node, ast.Attribute) and node.attr in CLIENTS:
                names = {node.attr} if "confluent" in ast.unparse(node.value) else set()
            else:
                continue
            found += [f"{path.relative_to(PACKAGE)}:{node.lineno} {n}" for n in names]
    return found


def test_every_client_is_built_by_kafka_clients():
    assert _direct_client_imports() == []


def test_librdkafka_lines_become_log_records_not_stderr(
    kafka_bootstrap, unique_topic, caplog, capfd
):
    """The demo's producer sees a partition count change (librdkafka's `%5|...|PARTCNT|`)."""
    caplog.set_level(logging.DEBUG, logger=LIBRDKAFKA_LOGGER.name)
    config = client_config(kafka_bootstrap)
    topic = unique_topic("logs")
    admin = KafkaAdmin(config, timeout_s=15)
    producer = None
    try:
        admin.ensure_topic(topic, 2)
        producer = KeyedProducer(config, topic, keys=8, rate=50, refresh_ms=200).start()
        time.sleep(1.0)
        admin.create_partitions(topic, 4)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not _partcnt(caplog.records):
            time.sleep(0.2)
    finally:
        if producer is not None:
            producer.stop()
        admin.close()
    records = _partcnt(caplog.records)
    assert records, "no PARTCNT log record from librdkafka"
    assert all(r.levelno == logging.INFO for r in records)  # syslog 5 (notice) -> INFO
    err = capfd.readouterr().err
    assert [line for line in err.splitlines() if line.startswith("%")] == []


def _partcnt(records: list[logging.LogRecord]) -> list[logging.LogRecord]:
    return [r for r in records if r.name == LIBRDKAFKA_LOGGER.name and "PARTCNT" in r.getMessage()]


def test_the_logger_never_reaches_a_config_file(tmp_path):
    from airflow_samza_expand._kafka.config import with_logger

    config = with_logger(client_config("127.0.0.1:9092"))
    text = Path(write_config_file(config, directory=tmp_path)).read_text()
    assert "logger" not in text and text == "bootstrap.servers=127.0.0.1:9092\n"


def test_librdkafka_errors_are_error_records(caplog, capfd):
    """syslog level 3 (a refused connection: `%3|...|FAIL|`) -> logging.ERROR."""
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    caplog.set_level(logging.DEBUG, logger=LIBRDKAFKA_LOGGER.name)
    admin = KafkaAdmin(client_config(f"127.0.0.1:{port}"), timeout_s=2)
    try:
        with pytest.raises(KafkaUnavailableError):
            admin.partition_counts(["t"])
    finally:
        admin.close()
    fails = [
        r
        for r in caplog.records
        if r.name == LIBRDKAFKA_LOGGER.name and r.getMessage().startswith("FAIL")
    ]
    assert fails and {r.levelno for r in fails} == {logging.ERROR}
    assert [line for line in capfd.readouterr().err.splitlines() if line.startswith("%")] == []
