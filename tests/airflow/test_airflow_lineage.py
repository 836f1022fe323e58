"""OpenLineage of the expansion steps through the OpenLineage provider (the extra
``openlineage``), on real Kafka: ``get_openlineage_facets_on_complete`` of executed operators,
and a factory DAG run (``dag.test()`` in its own process, `dag_runner.py`) with the provider's
file transport configured through ``AIRFLOW__OPENLINEAGE__TRANSPORT``: the events it emits carry
the grown topic with its counts, the coordinator topic with the job model version, the job's
input topics, and the Spark application gets the parent job - never a Kafka password.

The job is `fake_spark_submit.py` standing in for ``spark-submit`` (tests/e2e run the real one).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import airflow_env
import pytest
import test_airflow_ownership as ownership
from airflow_env import task_context
from race_dags import build

from airflow_samza_expand.airflow import _lineage
from airflow_samza_expand.airflow.operators import ExpandPartitionsOperator, WriteJobModelOperator
from airflow_samza_expand.airflow.operators._submit import SubmitStreamJobOperator
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._files import FileCoordinatorStore

pytest.importorskip("airflow.providers.openlineage")

pytestmark = pytest.mark.kafka
HERE, _launches, _spec = ownership.HERE, ownership._launches, ownership._spec
fake_spark = ownership.fake_spark  # the fake spark-submit on PATH (fixture)
SECRET = "S3CR3T-lineage-4711"


def _namespace(bootstrap: str) -> str:
    """OpenLineage's Kafka namespace: ``kafka://<host>:<port>`` of the first bootstrap server."""
    return f"kafka://{bootstrap.split(',')[0].strip()}"


def _datasets(items) -> list[tuple[str, str]]:
    return [(d.namespace, d.name) for d in items]


@pytest.fixture
def secret_conn(kafka_bootstrap, kafka_conn, monkeypatch) -> str:
    """``kafka_secret``: the test Kafka with SASL credentials in the extra (plaintext, ignored)."""
    extra = {"sasl.username": "lineage", "sasl.password": SECRET}
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_SECRET", airflow_env.kafka_connection_env(kafka_bootstrap, **extra)
    )
    return "kafka_secret"


def _serialized(op_lineage) -> str:
    from openlineage.client.serde import Serde

    return "".join(Serde.to_json(d) for d in [*op_lineage.inputs, *op_lineage.outputs])


def test_expand_reports_the_topic_as_input_and_output_with_its_counts(
    job, kafka_bootstrap, secret_conn
):
    j = job(2)
    op = ExpandPartitionsOperator(
        task_id="expand", topic=j.topic, target_partitions=4, kafka_config_id=secret_conn
    )
    op.execute(task_context("expand"))
    reported = op.get_openlineage_facets_on_complete(None)

    topic = [(_namespace(kafka_bootstrap), j.topic)]
    assert _datasets(reported.inputs) == topic and _datasets(reported.outputs) == topic
    facet = reported.outputs[0].facets[_lineage.PARTITIONS_FACET]
    assert (facet.before, facet.after, facet.changed) == (2, 4, True)
    assert isinstance(facet, _lineage.SamzaExpandPartitionsFacet)
    assert SECRET not in _serialized(reported)

    op.execute(task_context("expand"))  # a rerun changes nothing, and says so
    facet = op.get_openlineage_facets_on_complete(None).outputs[0].facets[_lineage.PARTITIONS_FACET]
    assert (facet.after, facet.changed) == (4, False)


def test_write_reports_the_coordinator_topic_with_the_job_model_version(
    job, admin, kafka_bootstrap, secret_conn
):
    j = job(2)
    admin.create_partitions(j.topic, 4)
    op = WriteJobModelOperator(task_id="write", job_name=j.name, kafka_config_id=secret_conn)
    result = op.execute(task_context("write"))
    reported = op.get_openlineage_facets_on_complete(None)

    assert result["version"] == 2
    assert reported.inputs == []
    coordinator = f"__samza_coordinator_{j.name}"
    assert _datasets(reported.outputs) == [(_namespace(kafka_bootstrap), coordinator)]
    facet = reported.outputs[0].facets[_lineage.JOB_MODEL_FACET]
    assert (facet.jobName, facet.version, facet.written) == (j.name, 2, True)
    assert facet.partitionCounts == {j.topic: 4}
    assert SECRET not in _serialized(reported)


def test_write_names_a_file_coordinator_store_by_its_folder(job, admin, tmp_path):
    j = job(2, write_model=False)
    FileCoordinatorStore(str(tmp_path), j.name).write_job_model(
        JobModel.initial(j.name, {j.topic: 2})
    )
    admin.create_partitions(j.topic, 4)
    op = WriteJobModelOperator(task_id="write", job_name=j.name, coordinator=str(tmp_path))
    op.execute(task_context("write"))
    reported = op.get_openlineage_facets_on_complete(None)

    assert _datasets(reported.outputs) == [("file", str(tmp_path / j.name))]
    assert reported.outputs[0].facets[_lineage.JOB_MODEL_FACET].version == 2


def test_submit_reports_the_job_input_topics(job, fake_spark, kafka_bootstrap):
    j = job(2)
    op = SubmitStreamJobOperator(
        task_id="submit", application="job.py", run_mode="available-now", job_name=j.name
    )
    op.execute(task_context("submit"))
    reported = op.get_openlineage_facets_on_complete(None)

    assert _datasets(reported.inputs) == [(_namespace(kafka_bootstrap), j.topic)]
    assert reported.outputs == []
    assert len(_launches(fake_spark)) == 1


def test_the_kafka_namespace_never_carries_credentials():
    config = {"bootstrap.servers": f"SASL_SSL://alice:{SECRET}@b1.example:9093,b2:9093"}
    assert _lineage.kafka_namespace(config) == "kafka://b1.example:9093"
    assert _lineage.kafka_namespace({"bootstrap.servers": "broker"}) == "kafka://broker:9092"


def _run_dag_with_openlineage(spec: dict, tmp_path: Path, env: dict[str, str]) -> dict:
    """The factory DAG of ``spec`` through ``dag_runner.py`` in a process with ``env``."""
    go = tmp_path / "go"
    go.touch()
    runner = {"dag": spec, "logical_date": "2026-01-01T00:00:00+00:00", "go": str(go),
              "ready": str(tmp_path / "ready")}  # fmt: skip
    proc = subprocess.run(
        [sys.executable, str(HERE / "dag_runner.py"), json.dumps(runner)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=400,
    )
    (tmp_path / "run.log").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, proc.stderr[-4000:]
    # dag_runner's JSON line; the provider may log after it (its DAG-run events at exit)
    return json.loads([x for x in proc.stdout.splitlines() if x.startswith('{"run_id"')][-1])


def test_an_expansion_dag_run_emits_the_datasets_and_facets(
    job, fake_spark, tmp_path, kafka_bootstrap
):
    j = job(2)
    spec = _spec(j, tmp_path, kafka_bootstrap, f"lineage_{j.name}")
    airflow_env.serialize_dag_to_db(build(**spec))
    events_file = tmp_path / "openlineage.jsonl"
    transport = {"type": "file", "log_file_path": str(events_file), "append": True}
    extra = {"sasl.username": "lineage", "sasl.password": SECRET}
    run = _run_dag_with_openlineage(
        spec,
        tmp_path,
        {
            "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport),
            "AIRFLOW__OPENLINEAGE__NAMESPACE": "samza-expand-test",
            "AIRFLOW__OPENLINEAGE__SPARK_INJECT_PARENT_JOB_INFO": "true",
            "AIRFLOW_CONN_KAFKA_DEFAULT": airflow_env.kafka_connection_env(
                kafka_bootstrap, **extra
            ),
        },
    )
    assert run["state"] == "success", run

    text = events_file.read_text()
    assert SECRET not in text
    events = [json.loads(line) for line in text.splitlines() if line.strip()]
    complete = {e["job"]["name"]: e for e in events if e["eventType"] == "COMPLETE"}
    dag_id = spec["dag_id"]
    namespace = _namespace(kafka_bootstrap)

    expand = complete[f"{dag_id}.expand"]
    for side in ("inputs", "outputs"):
        assert [(d["namespace"], d["name"]) for d in expand[side]] == [(namespace, j.topic)]
    counts = expand["outputs"][0]["facets"][_lineage.PARTITIONS_FACET]
    assert (counts["before"], counts["after"], counts["changed"]) == (2, 4, True)
    assert counts["_schemaURL"].endswith("SamzaExpandPartitionsFacet")

    write = complete[f"{dag_id}.write_job_model"]
    coordinator = f"__samza_coordinator_{j.name}"
    assert [(d["namespace"], d["name"]) for d in write["outputs"]] == [(namespace, coordinator)]
    model = write["outputs"][0]["facets"][_lineage.JOB_MODEL_FACET]
    assert (model["version"], model["partitionCounts"]) == (2, {j.topic: 4})

    # no job runs before the expansion: the plan chooses the cold restart, so
    # submit_standby launches nothing and submit launches the job (its lineage parent)
    for task_id in ("submit_standby", "submit"):
        inputs = complete[f"{dag_id}.{task_id}"]["inputs"]
        assert [(d["namespace"], d["name"]) for d in inputs] == [(namespace, j.topic)], task_id
    (argv,) = _launches(fake_spark)
    conf = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--conf")
    assert conf["spark.openlineage.parentJobNamespace"] == "samza-expand-test"
    assert conf["spark.openlineage.parentJobName"] == f"{dag_id}.submit"
    launcher = complete[f"{dag_id}.submit"]["run"]["runId"]
    assert conf["spark.openlineage.parentRunId"] == launcher
    assert conf["spark.openlineage.rootParentJobName"] == dag_id


_WITHOUT_OPENLINEAGE = """
import sys
# the client and the provider's code not installed (its provider metadata stays readable)
sys.modules.update(dict.fromkeys(["openlineage"] + [f"airflow.providers.openlineage.{m}"
                                  for m in ("utils", "plugins", "extractors")]))
from airflow_samza_expand.airflow import _lineage
from airflow_samza_expand.airflow.operators import ExpandPartitionsOperator
from airflow_samza_expand.airflow.operators._submit import SubmitStreamJobOperator
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._files import FileCoordinatorStore
ExpandPartitionsOperator(task_id="expand", topic="t", factor=2)
SubmitStreamJobOperator(task_id="submit", application="job.py")
conf = _lineage.spark_conf_with_parent_job({"a": "1"}, {}, parent_job=True, transport=True)
assert conf == {"a": "1"}, conf
print("ok")
"""


def test_the_operators_work_without_the_openlineage_extra(airflow_home):
    proc = subprocess.run(
        [sys.executable, "-c", _WITHOUT_OPENLINEAGE], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]
