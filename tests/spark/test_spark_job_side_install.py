"""The runtime installs on the Spark side without Airflow (docs/install.md, "The job side, into
a Spark environment"): a virtualenv that is a PySpark image (pyspark, pandas, pyarrow) plus the
one documented install - ``pip install samza-expand-runtime --constraint constraints.txt``, the
job side's own distribution (``runtime/``), every requirement checked, no ``--no-deps`` - has no
Airflow, and the example user job runs in it on the runtime: job model read, records counted,
group committed, heartbeat written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from spark_helpers import committed, create_topic, produce_sequenced, read_latest_outputs

from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store import open_store

# apache_ci: the Spark lane runs it (on Apache Kafka), beside the e2e tests
pytestmark = [
    pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow, pytest.mark.apache_ci,
    pytest.mark.timeout(900),
]  # fmt: skip

REPO = Path(__file__).resolve().parents[2]
UV = Path(sys.executable).with_name("uv")
IMAGE = ["pyspark", "pandas", "pyarrow"]  # what a PySpark image with pandas UDFs has


def _uv(*args: str) -> None:
    print("[venv] uv", " ".join(args[:3]), "...", flush=True)
    subprocess.run([str(UV), *args], check=True, cwd=REPO, timeout=600)


@pytest.fixture(scope="module")
def job_side_python(tmp_path_factory) -> Path:
    """A virtualenv of the Spark side: the image's packages, then the documented install of
    the job side's wheel (built from this checkout as a release builds it)."""
    venv = tmp_path_factory.mktemp("job-side") / "venv"
    _uv("venv", "--quiet", "--python", sys.executable, str(venv))
    python = venv / "bin" / "python"
    pins = ["-c", str(REPO / "constraints.txt")]
    _uv("pip", "install", "--quiet", "--python", str(python), *pins, *IMAGE)
    dist = tmp_path_factory.mktemp("job-side-dist")
    _uv("build", "--quiet", "--wheel", "--out-dir", str(dist), "runtime")
    (wheel,) = dist.glob("samza_expand_runtime-*.whl")
    _uv("pip", "install", "--quiet", "--python", str(python), *pins, str(wheel))
    _uv("pip", "check", "--python", str(python))  # every requirement of the job side met
    return python


def test_the_job_side_installs_without_airflow_and_runs_the_example_user_job(
    job_side_python, kafka_bootstrap, unique_topic, tmp_path
) -> None:
    from airflow_samza_expand._testing.spark_kafka import connector_jars

    python = str(job_side_python)
    probe = (
        "import importlib.util as u, airflow_samza_expand as a; "
        "print(u.find_spec('airflow') is None, a.__file__)"
    )
    clean = {**os.environ, "PYTHONPATH": ""}
    found = subprocess.run([python, "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                           check=True, env=clean).stdout.split()  # fmt: skip
    assert found[0] == "True", "Airflow is installed on the job side"
    assert found[1].startswith(str(job_side_python.parents[1])), found  # not the checkout
    topic, output = unique_topic("nin"), unique_topic("nout")
    job = "noairflow-" + topic
    create_topic(kafka_bootstrap, topic, 2)
    create_topic(kafka_bootstrap, output, 1)
    coordinator = str(tmp_path / "coordinator")
    open_store(coordinator, job, {"bootstrap.servers": kafka_bootstrap}).write_job_model(
        JobModel.initial(job, {topic: 2})
    )
    keys = [f"key-{i}" for i in range(10)]
    produce_sequenced(kafka_bootstrap, topic, keys, 6)
    env = {
        **os.environ,
        "PYSPARK_PYTHON": python,
        "PYSPARK_DRIVER_PYTHON": python,
        "PYSPARK_SUBMIT_ARGS": f"--master local[2] --jars {','.join(connector_jars())} "
        "pyspark-shell",
        "PYTHONPATH": "",  # the installed package, never the checkout
    }
    argv = [
        python, "-m", "airflow_samza_expand.examples.user_job", "--job-name", job,
        "--bootstrap-servers", kafka_bootstrap, "--coordinator", coordinator,
        "--checkpoint-dir", str(tmp_path / "checkpoint"), "--output-topic", output,
        "--trigger", "available-now", "--processor-id", "no-airflow-1",
        "--shuffle-partitions", "2",
    ]  # fmt: skip
    run = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    outputs = read_latest_outputs(kafka_bootstrap, output)
    assert {k: (o["count"], o["violations"]) for k, o in outputs.items()} == {
        k: (6, 0) for k in keys
    }
    assert sum(committed(kafka_bootstrap, job, topic, 2).values()) == 60
    store = open_store(coordinator, job, {"bootstrap.servers": kafka_bootstrap})
    assert store.processors()["no-airflow-1"]["state"] == "stopped"
