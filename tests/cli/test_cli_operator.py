"""The operator commands on the development broker: `samza-expand status` (job model,
processors with role/state/version/capabilities, leases, expansions with status and current
step, what to do next), `samza-expand stop` (the stop step's control record), one flag spelling
everywhere with the old ones as deprecated aliases, one line when Kafka cannot be reached."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading

import pytest

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand.cli import main
from airflow_samza_expand.core._clock import now_iso
from airflow_samza_expand.core._plan import plan_expansion
from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus
from airflow_samza_expand.store import coordinator_topic
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

pytestmark = pytest.mark.kafka


@pytest.fixture
def job(kafka_bootstrap, unique_topic, capsys):
    """A job with v1 over a 2-partition topic (written by init-job), its name and topic."""
    topic, name = unique_topic("orders"), unique_topic("job")
    with KafkaAdmin(client_config(kafka_bootstrap), timeout_s=15) as admin:
        admin.ensure_topic(topic, 2)
    argv = ["--job-name", name, "--topic", topic, "--bootstrap-servers", kafka_bootstrap]
    assert main(["init-job", *argv]) == 0
    capsys.readouterr()
    return name, topic


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_status_shows_model_processors_leases_expansions_and_next(kafka_bootstrap, job, capsys):
    name, topic = job
    with KafkaCoordinatorStore(client_config(kafka_bootstrap), name) as store:
        model = store.latest_job_model()
        store.heartbeat(
            "proc-a", 1, "running", role="active", ttl_s=30, capabilities=["in-place", "standby"],
            consumer_group="orders-app",
        )
        store.heartbeat("proc-b", 1, "standby", role="standby", ttl_s=30, capabilities=["standby"])
        stamp = now_iso()
        record = ExpansionRecord(
            expansion_id=f"{name}~{topic}.2-4",
            job_name=name,
            base_version=1,
            target_version=2,
            plan=plan_expansion(model, {topic: 2}, {topic: 4}).to_dict(),
            status=ExpansionStatus.EXPANDED,
            owner="run-1",
            created_at=stamp,
            updated_at=stamp,
        )
        record = record.with_step("plan", started_at=stamp, ended_at=stamp)
        record = record.with_step("expand", started_at=stamp, ended_at=stamp)
        record = record.with_step("barrier_snapshot", started_at=stamp)
        store.put_expansion(record, expected_revision=0)
        store.acquire_lease("expansion", "run-1", ttl_s=600)

    code, out, err = cli(capsys, "status", name, "--bootstrap-servers", kafka_bootstrap)
    assert (code, err) == (0, ""), err
    assert f"job {name} (coordinator store: topic {coordinator_topic(name)} at " in out
    assert "job model: v1 (of 1 stored), grouper GroupByPartitionFixedTasks, 2 tasks" in out
    assert f"  {topic}: 2 partitions (on Kafka: 2)" in out
    assert "proc-a: active running v1" in out and "can: in-place, standby" in out
    assert "can: in-place, standby; commits to group orders-app" in out
    assert "proc-b: standby standby v1" in out and "can: standby" in out
    assert "  active: proc-a" in out
    assert "  expansion: held by run-1 (epoch 1, expires in" in out
    assert f"{name}~{topic}.2-4: expanded, v1 -> v2 ({topic} 2 -> 4); step barrier_snapshot " \
        "(running)" in out  # fmt: skip
    nxt = out.split("next:\n", 1)[1]
    assert "is under way (run run-1): watch its DAG run or the job page" in nxt

    code, out, _ = cli(capsys, "status", "--job-name", name, "--bootstrap-servers",
                       kafka_bootstrap, "--json")  # fmt: skip
    doc = json.loads(out)
    assert code == 0 and doc["job_model"]["version"] == 1
    assert [p["processor_id"] for p in doc["processors"]] == ["proc-a", "proc-b"]
    assert doc["processors"][0]["capabilities"] == ["in-place", "standby"]
    assert doc["expansions"][0]["step"] == "barrier_snapshot (running)"


def test_status_of_a_job_without_processors_says_to_start_it(kafka_bootstrap, job, capsys):
    name, _ = job
    code, out, _ = cli(capsys, "status", name, "--bootstrap-servers", kafka_bootstrap)
    assert code == 0
    assert "processors: none" in out and "expansions: none" in out
    assert f"no processor of job {name} runs: start the job (it reads job model v1)" in out


def test_status_of_an_unknown_job_names_the_jobs_there(kafka_bootstrap, job, capsys):
    name, _ = job
    typo = name[:-1]
    code, out, err = cli(capsys, "status", typo, "--bootstrap-servers", kafka_bootstrap)
    assert (code, out) == (2, "")
    assert f"no job {typo!r}: its coordinator topic {coordinator_topic(typo)} does not exist" in err
    assert f"did you mean {name}" in err and "samza-expand init-job" in err
    with KafkaAdmin(client_config(kafka_bootstrap), timeout_s=15) as admin:
        assert coordinator_topic(typo) not in admin.topic_names()  # nothing created


def test_stop_writes_the_stop_record_and_waits_for_the_processors(kafka_bootstrap, job, capsys):
    name, _ = job
    config = client_config(kafka_bootstrap)
    with KafkaCoordinatorStore(config, name) as store:
        store.heartbeat("proc-a", 1, "running", role="active", ttl_s=30)
    argv = ["stop", name, "--bootstrap-servers", kafka_bootstrap, "--reason", "upgrade"]
    code, out, err = cli(capsys, *argv, "--wait", "1")  # the processor does not stop
    assert code == 1 and f"requested stop of job {name} v1 (upgrade)" in out
    assert "after --wait 1 s: waiting for 1 processor(s)" in err and "proc-a" in err
    with KafkaCoordinatorStore(config, name) as store:
        request = store.stop_request()
    assert request["version"] == 1 and request["reason"] == "upgrade"

    def processor() -> None:  # as the job's runtime does: stop once it reads the stop record
        with KafkaCoordinatorStore(config, name) as store:
            while store.stop_request() is None:
                stopped.wait(0.05)
            store.heartbeat("proc-a", 1, "stopped", role="active", ttl_s=30)

    stopped = threading.Event()
    with KafkaCoordinatorStore(config, name) as store:
        store.clear_stop()
    thread = threading.Thread(target=processor, daemon=True)
    thread.start()
    code, out, err = cli(capsys, *argv, "--wait", "60")
    thread.join(30)
    assert (code, err) == (0, "")
    assert "requested stop" in out and "all processors of v1 stopped: ['proc-a']" in out


def test_stop_with_nothing_running_writes_nothing(kafka_bootstrap, job, capsys):
    name, _ = job
    code, out, _ = cli(capsys, "stop", name, "--bootstrap-servers", kafka_bootstrap)
    assert code == 0 and f"no processor of job {name} runs job model v1: nothing to stop" in out
    with KafkaCoordinatorStore(client_config(kafka_bootstrap), name) as store:
        assert store.stop_request() is None


def test_one_spelling_per_flag_and_no_other(kafka_bootstrap, unique_topic, capsys):
    topic, name, custom = unique_topic("orders"), unique_topic("job"), unique_topic("coord")
    with KafkaAdmin(client_config(kafka_bootstrap), timeout_s=15) as admin:
        admin.ensure_topic(topic, 2)
    argv = ["init-job", "--job-name", name, "--topic", topic, "--coordinator", f"kafka://{custom}"]
    code, out, err = cli(capsys, *argv, "--bootstrap-servers", kafka_bootstrap)
    assert code == 0, err
    assert f"wrote job model v1 of {name} in {custom}" in out
    argv = ["status", "--job-name", name, "--coordinator", f"kafka://{custom}"]
    code, out, err = cli(capsys, *argv, "--bootstrap-servers", kafka_bootstrap)
    assert (code, err) == (0, "") and "job model: v1" in out
    for old in (["--job", name], ["--coordinator-topic", custom], ["--kafka-conn-id", "k"]):
        with pytest.raises(SystemExit) as refused:  # no old spelling, no abbreviation
            main(["status", *old, "--bootstrap-servers", kafka_bootstrap])
        err = capsys.readouterr().err
        assert refused.value.code == 2 and f"unrecognized arguments: {old[0]}" in err, err
    helps = {c: build_help(c) for c in ("init-job", "status", "stop")}
    for text in helps.values():
        assert "--job-name" in text and "--coordinator" in text and "--bootstrap-servers" in text
        assert "--kafka-config-id" in text and "--kafka-conn-id" not in text


def build_help(command: str) -> str:
    from airflow_samza_expand.cli import build_parser

    parser = build_parser(only=command)
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices[command].format_help()


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["init-job", "--job-name", "j", "--topic", "t"], ["pass --bootstrap-servers HOST:PORT"]),
        (["status", "j"], ["pass --bootstrap-servers HOST:PORT"]),
        (["init-job", "--topic", "t", "--bootstrap-servers", "x:1"], ["init-job orders-counter"]),
        (["status", "bad name!", "--bootstrap-servers", "x:1"], ["'bad name!' cannot name a"]),
        (["status", "a", "--job-name", "b", "--bootstrap-servers", "x:1"], ["two job names"]),
        (["stop", "j", "--bootstrap-servers", "x:1", "--wait", "-1"], ["--wait -1 - pass"]),
        (["status", "j", "--bootstrap-servers", "x:1", "--timeout", "0"], ["--timeout 0 - pass"]),
    ],
)
def test_bad_input_is_refused_with_the_fix_before_any_connection(capsys, argv, fragments):
    code, out, err = cli(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1
    for fragment in fragments:
        assert fragment in err


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when the block ends: nothing listens


@pytest.mark.parametrize("command", ["init-job --topic orders", "status", "stop"])
def test_an_unreachable_broker_is_one_line(command):
    """A real process, as an operator runs it: librdkafka logs each failed connection attempt,
    which the command keeps to itself; one line says what to check."""
    port = _closed_port()
    argv = [*command.split(), "--job-name", "orders-counter", "--timeout", "2"]
    done = subprocess.run(
        [sys.executable, "-m", "airflow_samza_expand.cli", *argv,
         "--bootstrap-servers", f"127.0.0.1:{port}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"error: cannot reach Kafka at 127.0.0.1:{port} within 2 s - check --bootstrap-servers "
        "(or --kafka-config, --kafka-config-id, $SAMZA_EXPAND_BOOTSTRAP_SERVERS) and that the "
        "brokers run; --timeout waits longer"
    ]


def test_version_and_the_dev_group(capsys):
    from airflow_samza_expand import __version__

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out == f"samza-expand {__version__}\n"
    with pytest.raises(SystemExit):
        main(["--help"])
    listed = capsys.readouterr().out
    assert "status" in listed and "stop" in listed and "dev " in listed
    for tool in ("broker", "apache-kafka", "spark-standalone", "spark-kafka-jars"):
        assert f" {tool} " not in listed  # under `samza-expand dev`, out of the user's list
    assert main(["dev", "broker", "--port", "70000"]) == 2
    assert "--port 70000 is not a TCP port" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # no other spelling of a command
        main(["dev-broker", "--port", "70000"])
    assert "no command 'dev-broker'" in capsys.readouterr().err


def test_status_of_a_failed_expansion_says_how_to_go_on(kafka_bootstrap, job, capsys):
    name, topic = job
    with KafkaCoordinatorStore(client_config(kafka_bootstrap), name) as store:
        model = store.latest_job_model()
        stamp = now_iso()
        record = ExpansionRecord(
            expansion_id=f"{name}~{topic}.2-4",
            job_name=name,
            base_version=1,
            target_version=2,
            plan=plan_expansion(model, {topic: 2}, {topic: 4}).to_dict(),
            status=ExpansionStatus.FAILED,
            owner="run-1",
            created_at=stamp,
            updated_at=stamp,
            results={"failures": [{"step": "barrier", "at": stamp, "lines": ["timeout"]}]},
        ).with_step("barrier", started_at=stamp)
        store.put_expansion(record, expected_revision=0)
    code, out, _ = cli(capsys, "status", name, "--bootstrap-servers", kafka_bootstrap)
    assert code == 0
    nxt = out.split("next:\n", 1)[1]
    assert f"expansion {name}~{topic}.2-4 (failed, step barrier (running)) stopped: barrier " \
        f"failed at {stamp}" in nxt  # fmt: skip
    assert "clear the failed task of that DAG run; each step finds its own work done" in nxt
