"""The job's Kafka settings as an owner-only file (kafka.config_file): never on a command line."""

from __future__ import annotations

import os
import stat

import pytest

from airflow_samza_expand._kafka.config import read_config_file
from airflow_samza_expand._kafka.config_file import (
    check_free_of_secrets,
    job_kafka_args,
    write_config_file,
)
from airflow_samza_expand.core.errors import SecretValueError

CONFIG = {
    "bootstrap.servers": "b:9093",
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "job",
    "sasl.password": "s3cr=t;x",
    "error_cb": print,
}


def test_written_owner_only_in_a_private_directory_and_read_back(tmp_path) -> None:
    directory = tmp_path / "logs"
    path = write_config_file(CONFIG, directory=directory)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    expected = {k: v for k, v in CONFIG.items() if k != "error_cb"}
    assert read_config_file(path) == expected
    assert job_kafka_args(path) == ["--kafka-config", path]


def test_a_value_with_a_line_break_is_refused_and_nothing_is_written(tmp_path) -> None:
    with pytest.raises(ValueError, match="sasl.password"):
        write_config_file({**CONFIG, "sasl.password": "a\nb"}, directory=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_arguments_holding_a_secret_are_refused_naming_the_key() -> None:
    check_free_of_secrets(["--job-name", "job", "--kafka-config", "/x"], CONFIG)  # username ok
    with pytest.raises(SecretValueError, match="sasl.password"):
        check_free_of_secrets(["--conf", "x=s3cr=t;x"], CONFIG)
