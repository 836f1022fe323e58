"""The operator commands that need Kafka (init-job, status, stop) take the bootstrap servers
from ``SAMZA_EXPAND_BOOTSTRAP_SERVERS`` when neither ``--bootstrap-servers`` nor a
``--kafka-config`` file names them; the flag wins over the variable; without either the error
names all three; the help says so. No command's help carries a note meant for contributors."""

from __future__ import annotations

import re

import pytest

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand.cli import main

ENV = "SAMZA_EXPAND_BOOTSTRAP_SERVERS"


@pytest.mark.kafka
def test_the_kafka_commands_read_the_bootstrap_servers_from_the_environment(
    kafka_bootstrap, unique_topic, monkeypatch, capsys, tmp_path
):
    topic, name = unique_topic("orders"), unique_topic("job")
    with KafkaAdmin(client_config(kafka_bootstrap), timeout_s=15) as admin:
        admin.ensure_topic(topic, 2)
    monkeypatch.setenv(ENV, kafka_bootstrap)
    assert main(["init-job", "--job-name", name, "--topic", topic]) == 0
    assert main(["status", "--job-name", name]) == 0
    assert f"{topic}" in capsys.readouterr().out
    # the flag wins: a variable naming nothing that listens is not used
    monkeypatch.setenv(ENV, "127.0.0.1:1")
    assert main(["status", "--job-name", name, "--bootstrap-servers", kafka_bootstrap]) == 0
    # so does a --kafka-config file that names the servers
    config = tmp_path / "client.properties"
    config.write_text(f"bootstrap.servers={kafka_bootstrap}\n")
    assert main(["stop", "--job-name", name, "--kafka-config", str(config)]) == 0


@pytest.mark.parametrize("command", ["init-job --topic orders", "status", "stop"])
def test_without_servers_the_error_names_the_variable(command, monkeypatch, capsys):
    monkeypatch.delenv(ENV, raising=False)
    assert main([*command.split(), "--job-name", "orders-counter"]) == 2
    assert ENV in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*command.split()[:1], "--help"])
    assert f"${ENV}" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("command", ["plan", "init-job", "status", "stop", "demo", "dev"])
def test_no_help_carries_a_note_for_contributors(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    internal = re.compile(r"module level|\bDESIGN\b|\brule \d|\bissue \d|\b_[a-z]+\.[a-z_]+")
    assert internal.findall(shown) == [], shown
