"""The README's "Your first job" walk-through, followed as written up to (excluding) Spark: its
Kafka block runs in bash against a fresh development broker, then the topics and job model v1
it promises are there; a rerun of its init-job line changes nothing."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_samza_expand.kafka.admin import KafkaAdmin
from airflow_samza_expand.kafka.config import client_config
from airflow_samza_expand.store.kafka import KafkaCoordinatorStore
from airflow_samza_expand.testing import DevBrokerProcess

pytestmark = pytest.mark.kafka

README = Path(__file__).resolve().parents[1] / "README.md"
MARKER = "<!-- first-job: kafka commands"


def section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## Your first job")
    return text[start : text.index("\n## ", start + 1)]


def kafka_block() -> str:
    """The fenced bash block right after the marker comment."""
    after = section().split(MARKER, 1)[1]
    match = re.search(r"```bash\n(.*?)```", after, re.S)
    assert match, f"no ```bash block after {MARKER!r} in README.md"
    return match.group(1)


def run_block(block: str, bootstrap: str) -> subprocess.CompletedProcess[str]:
    bin_dir = os.path.dirname(sys.executable)  # samza-expand and python of this environment
    env = {**os.environ, "KAFKA": bootstrap, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_the_walk_through_kafka_commands_as_written(tmp_path):
    block = kafka_block()
    assert "samza-expand init-job" in block and "spark-submit" not in block
    with DevBrokerProcess(data_dir=str(tmp_path / "broker")) as broker:
        result = run_block(block, broker.bootstrap)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "wrote job model v1 of orders-counter" in result.stdout
        config = client_config(broker.bootstrap)
        with KafkaAdmin(config, timeout_s=15) as admin:
            assert admin.partition_counts(["orders", "orders-counts"]) == {
                "orders": 2,
                "orders-counts": 1,
            }
        with KafkaCoordinatorStore(config, "orders-counter") as store:
            (model,) = store.job_model_history()
        assert model.partition_counts() == {"orders": 2}
        assert {
            t: sorted(s.partition for s in ssps) for t, ssps in model.task_to_ssps().items()
        } == {
            "Partition 0": [0],
            "Partition 1": [1],
        }
        # the block's init-job step again: a no-op success
        init = block[block.index("samza-expand init-job") :]
        again = run_block(init, broker.bootstrap)
        assert again.returncode == 0, again.stderr
        assert "nothing written" in again.stdout


def test_the_walk_through_dag_file_is_python():
    blocks = re.findall(r"```python\n(.*?)```", section(), re.S)
    assert any("build_expansion_dag(" in b for b in blocks)
    for block in blocks:
        ast.parse(block)


def test_the_operations_guide_init_job_command_parses():
    """docs/operations.md writes v1 with init-job (no snippet that skips the topic check)."""
    import shlex

    from airflow_samza_expand.cli import build_parser

    text = (README.parent / "docs" / "operations.md").read_text(encoding="utf-8")
    match = re.search(r"samza-expand (init-job .*?)\n\s*```", text, re.S)
    assert match, "docs/operations.md has no samza-expand init-job command"
    argv = shlex.split(match.group(1).replace("\\\n", " "))
    args = build_parser(only="init-job").parse_args(argv)
    assert (args.job_name, args.topic, args.create_output_topic) == (
        "orders-counter",
        ["orders"],
        "orders-counts",
    )
    assert "JobModel.initial(" not in text
