"""scripts/test.sh runs each part through scripts/test_part.sh: the 30 slowest tests are listed,
and a part that selects no test fails the run (pytest's exit 5 once counted as a pass, so a
broken marker could silently empty a part of CI)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _part(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "scripts/test_part.sh", *args, "-p", "no:cacheprovider"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_a_part_that_selects_no_test_fails() -> None:
    done = _part("tests/core", "-m", "no_such_marker")
    assert done.returncode == 5, done.stdout[-2000:]
    assert "this part selected no test" in done.stderr
    assert "check its -m marker expression" in done.stderr


def test_a_part_lists_its_slowest_tests() -> None:
    done = _part("tests/core/test_core_model.py", "-q")
    assert done.returncode == 0, done.stdout[-2000:]
    assert "slowest 30 durations" in done.stdout


def test_every_part_of_test_sh_runs_through_the_part_script_and_the_lanes_split_each_part() -> None:
    """Each Kafka's part is split into its Spark tests (`and spark`) and the rest (`and not
    spark`) of the same selection, and part 1's Spark tests once more by path (the rest lane
    takes REST_LANE_SPARK, the Spark lane ignores exactly those): together the runs select
    every test of both parts, once, each through the part script, and the lanes run at once."""
    script = (REPO / "scripts" / "test.sh").read_text()
    assert 'bash scripts/test_part.sh "$@"' in script
    selections = dict(re.findall(r'^(APACHE_PART|DEV_PART)="(.+?)"', script, flags=re.M))
    assert set(selections) == {"APACHE_PART", "DEV_PART"}, selections
    runs = re.findall(
        r'^\s*run_part --kafka=(\w+) -m "\$(\w+) and (spark|not spark)"(.*)$', script, flags=re.M
    )
    assert sorted(runs) == [
        ("apache", "APACHE_PART", "not spark", ""),
        ("apache", "APACHE_PART", "spark", ' "${REST_LANE_SPARK[@]/#/--ignore=}"'),
        ("apache", "APACHE_PART", "spark", ' "${REST_LANE_SPARK[@]}"'),
        ("dev", "DEV_PART", "not spark", ""),
        ("dev", "DEV_PART", "spark", ""),
    ], runs
    listed = re.search(r"^REST_LANE_SPARK=\(\n(.*?)\n\)", script, flags=re.M | re.S)
    assert listed, "REST_LANE_SPARK=( one path per line )"
    for path in listed.group(1).split():
        assert (REPO / path).is_file(), f"REST_LANE_SPARK names {path}, which does not exist"
    assert re.search(r"^rest_lane .*&$", script, flags=re.M) and "spark_lane ||" in script
    assert re.search(r"^airflow_lane .*&$", script, flags=re.M)
    assert 'wait "$rest_pid"' in script and 'wait "$airflow_pid"' in script
