"""The job is named the same way in every command (``init-job JOB`` as ``status JOB`` and
``stop JOB``; ``--job-name`` still works); bad input is one line naming the fix, and a mistyped
command lists only the commands the help shows; ``--kafka-config-id`` takes an Airflow
connection's client config, printing none of its secrets."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand.cli import DEV_MODULES, main

DEV_TOOLS = list(DEV_MODULES)  # under `samza-expand dev` only


@pytest.mark.kafka
def test_every_command_takes_the_job_positionally(kafka_bootstrap, unique_topic, capsys):
    topic, name = unique_topic("orders"), unique_topic("job")
    with KafkaAdmin(client_config(kafka_bootstrap), timeout_s=15) as admin:
        admin.ensure_topic(topic, 2)
    servers = ["--bootstrap-servers", kafka_bootstrap]
    assert main(["init-job", name, "--topic", topic, *servers]) == 0
    assert f"job model v1 of {name}" in capsys.readouterr().out
    assert main(["init-job", "--job-name", name, "--topic", topic, *servers]) == 0  # kept
    capsys.readouterr()
    assert main(["status", name, "--json", *servers]) == 0
    assert json.loads(capsys.readouterr().out)["job_name"] == name
    assert main(["stop", name, *servers]) == 0
    # the same job twice is fine; two different names are refused, naming both
    assert main(["init-job", name, "--job-name", name, "--topic", topic, *servers]) == 0
    capsys.readouterr()
    assert main(["init-job", name, "--job-name", "other", "--topic", topic, *servers]) == 2
    assert "two job names" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["init-job", "status", "stop"])
def test_without_a_job_the_error_shows_the_positional_form(command, capsys):
    topic = ["--topic", "t"] if command == "init-job" else []
    assert main([command, *topic]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: which job? - name it, e.g. samza-expand {command} orders-counter"
    assert main([command, "bad/name", *topic]) == 2
    assert capsys.readouterr().err.startswith("error: JOB 'bad/name' cannot name a Kafka topic")


@pytest.mark.parametrize(
    ("argv", "prog"),
    [
        (["init-job", "j"], "samza-expand init-job"),  # --topic missing
        (["status", "j", "--timeout", "soon"], "samza-expand status"),
        (["stop", "j", "--no-such-flag"], "samza-expand stop"),
        ([], "samza-expand"),
    ],
)
def test_argparse_errors_are_one_line_naming_the_help(argv, prog, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines  # no usage block
    assert lines[0].startswith(f"{prog}: error: ") and lines[0].endswith(f"(see {prog} --help)")


def test_a_mistyped_command_lists_only_the_public_commands(capsys):
    with pytest.raises(SystemExit):
        main(["stauts", "j"])
    (line,) = capsys.readouterr().err.splitlines()
    assert "did you mean status?" in line, line
    assert "choose from plan, init-job, status, stop, demo, dev" in line, line
    assert not [name for name in DEV_TOOLS if name in line], line
    with pytest.raises(SystemExit):
        main(["dev", "brokr"])
    (line,) = capsys.readouterr().err.splitlines()
    assert "samza-expand dev: error: no command 'brokr' - did you mean broker?" in line, line
    assert "dev-broker" not in line, line


@pytest.mark.kafka
def test_kafka_config_id_reads_an_airflow_connection_and_prints_no_secret(
    kafka_bootstrap, unique_topic, tmp_path
):
    topic, name = unique_topic("orders"), unique_topic("job")
    with KafkaAdmin(client_config(kafka_bootstrap), timeout_s=15) as admin:
        admin.ensure_topic(topic, 2)
    secret = "s3cret-never-printed"
    extra = {"bootstrap.servers": kafka_bootstrap, "client.id": "cli", "sasl.password": secret}
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")},
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW_CONN_MY_KAFKA": json.dumps({"conn_type": "kafka", "extra": extra}),
        "SAMZA_EXPAND_BOOTSTRAP_SERVERS": "127.0.0.1:1",  # not used: the connection is
    }

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "airflow_samza_expand.cli", *args]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)

    init = cli("init-job", name, "--topic", topic, "--kafka-config-id", "my_kafka")
    assert init.returncode == 0, init.stderr
    status = cli("status", name, "--json", "--kafka-config-id", "my_kafka")
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith("{"), status.stdout  # stdout is the JSON only
    assert json.loads(status.stdout)["job_name"] == name
    missing = cli("stop", name, "--kafka-config-id", "nope")
    assert missing.returncode == 2
    assert "--kafka-config-id nope" in missing.stderr and "AIRFLOW_CONN_NOPE" in missing.stderr
    both = cli("stop", name, "--kafka-config-id", "my_kafka", "--bootstrap-servers", "x:1")
    assert both.returncode == 2 and "gives the whole client config" in both.stderr
    for done in (init, status, missing, both):
        assert secret not in done.stdout + done.stderr
