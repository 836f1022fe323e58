"""`samza-expand plan`: human and JSON output, job model files, errors with exit code 2."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_samza_expand.cli import main
from airflow_samza_expand.core._plan import ExpansionPlan
from airflow_samza_expand.core.model import JobModel

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "airflow_samza_expand/examples/sample_job_model.json"
T1 = "2026-11-22T02:00:00Z"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["plan", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_readme_command_on_the_sample_job_model(capsys):
    code, out, err = run(capsys, "--job-model", str(SAMPLE), "--target", "orders=8")
    assert (code, err) == (0, "")
    assert "Expansion plan for job 'orders-counter': job model v1 -> v2" in out
    assert "orders: 2 -> 8 partitions (x4)" in out
    assert "Partition 0  orders  0 2* 4* 6*" in out
    assert "Partition 1  orders  1 3* 5* 7*" in out
    assert 'partitions 0 2* 4* 6* --> bucket 0 --> task "Partition 0"' in out
    assert "orders: 0 1" in out  # barrier partitions


def test_partitions_without_a_file(capsys):
    code, out, _ = run(
        capsys,
        "--partitions",
        "orders=2",
        "--grouper",
        "GroupByPartitionFixedTasks",
        "--target",
        "orders=4",
    )
    assert code == 0
    assert "Partition 0  orders  0 2*" in out


def test_ssp_grouper_names_in_the_table(capsys):
    code, out, _ = run(
        capsys,
        "--partitions",
        "orders=2,payments=2",
        "--grouper",
        "GroupBySystemStreamPartitionFixedTasks",
        "--target",
        "orders=4",
    )
    assert code == 0
    assert re.search(r"SystemStreamPartition \[kafka, orders, 1\]\s+orders\s+1 3\*\n", out)
    assert "unchanged: payments (2)" in out


def test_json_output_is_the_plan(capsys):
    code, out, _ = run(
        capsys, "--job-model", str(SAMPLE), "--target", "orders=8", "--json", "--created-at", T1
    )
    assert code == 0
    plan = ExpansionPlan.from_dict(json.loads(out))
    assert plan.counts_after == {"orders": 8}
    assert plan.new_job_model.version == 2
    assert plan.new_job_model.created_at == T1
    code, again, _ = run(
        capsys, "--job-model", str(SAMPLE), "--target", "orders=8", "--json", "--created-at", T1
    )
    assert again == out  # deterministic


def test_write_job_model_and_plan_again_from_it(capsys, tmp_path):
    v2 = tmp_path / "v2.json"
    code, out, _ = run(
        capsys, "--job-model", str(SAMPLE), "--target", "orders=4", "--write-job-model", str(v2)
    )
    assert code == 0 and f"Wrote job model v2 to {v2}" in out
    model = JobModel.from_json(v2.read_text())
    assert model.version == 2 and model.partition_counts() == {"orders": 4}
    code, out, _ = run(capsys, "--job-model", str(v2), "--target", "orders=16")
    assert code == 0
    assert "job model v2 -> v3" in out
    assert "partitions 1 3 5* 7* 9* 11* 13* 15* --> bucket 1" in out


def test_cluster_partitions_and_any_multiple(capsys):
    code, out, _ = run(
        capsys,
        "--partitions",
        "orders=2",
        "--target",
        "orders=6",
        "--allow-any-multiple",
        "--cluster-partitions",
        "orders=6",
    )
    assert code == 0 and "orders: 2 -> 6 partitions (x3)" in out


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (
            ["--job-model", str(SAMPLE), "--target", "orders=6"],
            ["not by a power of two", "orders=4 or orders=8"],
        ),
        (
            ["--job-model", str(SAMPLE), "--target", "orders=1"],
            ["cannot shrink from 2 to 1", "orders=4"],
        ),
        (["--job-model", str(SAMPLE), "--target", "orders"], ["must look like STREAM=COUNT"]),
        (
            ["--job-model", str(SAMPLE), "--target", "orders=eight"],
            ["'eight' is not a whole number"],
        ),
        (
            ["--job-model", str(SAMPLE), "--target", "refunds=4"],
            ["'refunds' is not an input of job 'orders-counter'", "target one of those"],
        ),
        (
            ["--job-model", "/no/such/file.json", "--target", "orders=4"],
            ["cannot read job model", "--job-model airflow_samza_expand/examples/"],
        ),
        (["--partitions", "orders=0", "--target", "orders=4"], ["must be a positive integer"]),
        (
            [
                "--partitions",
                "orders=2",
                "--target",
                "orders=4",
                "--cluster-partitions",
                "orders=3",
            ],
            ["'orders' has 3 partitions on the cluster"],
        ),
        (
            ["--partitions", "orders=2", "--target", "orders=4", "--algorithm", "nope.Missing"],
            ["cannot import module 'nope'", "job.systemstreampartition.expansion.algorithm"],
        ),
        (
            ["--partitions", "orders=2", "--target", "orders=4,orders=8"],
            ["names stream 'orders' twice"],
        ),
        (
            ["--partitions", "orders=2", "--target", "orders=4", "--job-name", "bad name!"],
            ["--job-name 'bad name!' cannot name a Kafka topic", "a-z, A-Z, 0-9"],
        ),
        (
            ["--partitions", "orders=2", "--target", "orders=8192"],
            ["above --max-partitions 4096", "raise --max-partitions if"],
        ),
    ],
)
def test_bad_input_exits_2_with_a_fix(capsys, argv, fragments):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("error: ")
    for fragment in fragments:
        assert fragment in err


def test_malformed_job_model_file_names_the_field(capsys, tmp_path):
    doc = json.loads(SAMPLE.read_text())
    doc["streams"][0]["current"] = -1
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    out_file = tmp_path / "never.json"
    code, _, err = run(
        capsys, "--job-model", str(bad), "--target", "orders=4", "--write-job-model", str(out_file)
    )
    assert code == 2
    assert "job model field 'streams[0].current' must be a positive integer, got -1" in err
    assert not out_file.exists()


def test_max_partitions_flag_raises_the_limit(capsys):
    code, out, _ = run(capsys, "--partitions", "orders=2", "--target", "orders=8192",
                       "--max-partitions", "8192", "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["counts_after"] == {"orders": 8192}


@pytest.mark.parametrize("text", ['{"version": 1,', "{}"])
def test_a_file_that_is_no_job_model_gets_a_hint(capsys, tmp_path, text):
    bad = tmp_path / "model.json"
    bad.write_text(text)
    code, out, err = run(capsys, "--job-model", str(bad), "--target", "orders=4")
    assert (code, out) == (2, "")
    assert "--job-model takes a job model JSON document as `samza-expand plan " in err
    assert "--write-job-model` writes it (e.g. airflow_samza_expand/examples/" in err
    assert "or build v1 with --partitions STREAM=N instead" in err


def test_missing_target_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["plan", "--job-model", str(SAMPLE)])
    assert info.value.code == 2
    assert "--target" in capsys.readouterr().err


def test_installed_console_script(tmp_path):
    script = Path(sys.executable).parent / "samza-expand"
    if not script.exists():
        pytest.skip(f"console script not installed next to {sys.executable}")
    ok = subprocess.run(
        [str(script), "plan", "--job-model", str(SAMPLE), "--target", "orders=8"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert ok.returncode == 0, ok.stderr
    assert "Partition 1  orders  1 3* 5* 7*" in ok.stdout
    bad = subprocess.run(
        [str(script), "plan", "--job-model", str(SAMPLE), "--target", "orders=3"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: ") and "orders=4" in bad.stderr
