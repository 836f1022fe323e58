"""scripts/test.sh runs each part through scripts/test_part.sh: the 30 slowest tests are listed,
and a part that selects no test fails the run (pytest's exit 5 once counted as a pass, so a
broken marker could silently empty a part of CI)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# the suite's own runs write every test's time here (scripts/test.sh); these runs of throwaway
# parts must not add their files to it
OWN_ENV = {k: v for k, v in os.environ.items() if k != "SAMZA_EXPAND_JUNIT_DIR"}


def _part(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "scripts/test_part.sh", *args, "-p", "no:cacheprovider"],
        cwd=REPO, capture_output=True, text=True, timeout=300, env=OWN_ENV,
    )  # fmt: skip


def test_a_part_that_selects_no_test_fails() -> None:
    done = _part("tests/core", "-m", "spark and not spark")
    assert done.returncode == 5, done.stdout[-2000:]
    assert "this part selected no test" in done.stderr
    assert "check its -m marker expression" in done.stderr
    # a misspelt marker in a part's -m expression is an error of its own (--strict-markers)
    done = _part("tests/core", "-m", "no_such_marker")
    assert done.returncode == 4, done.stdout[-2000:]
    assert "Unknown marker(s) in '-m' expression: no_such_marker" in done.stderr


def test_a_part_lists_its_slowest_tests() -> None:
    done = _part("tests/core/test_core_model.py", "-q")
    assert done.returncode == 0, done.stdout[-2000:]
    assert "slowest 30 durations" in done.stdout


def test_every_part_of_test_sh_runs_through_the_part_script_and_the_lanes_split_each_part() -> None:
    """Each Kafka's part is split into its Spark tests (`and spark`) and the rest (`and not
    spark`) of the same selection; part 1's tests without Spark once more by path (the second
    Airflow lane takes AIRFLOW2_LANE, the first ignores exactly those), and part 1's Spark
    tests once more by path (the rest lane takes REST_LANE_SPARK, the Airflow lanes
    AIRFLOW_LANE_SPARK and AIRFLOW2_LANE_SPARK, the Spark lane ignores exactly those), and
    part 2's Spark tests in AIRFLOW2_LANE_DEV_SPARK in the second Airflow lane (the rest lane
    ignores exactly those):
    together the runs select every test of both parts, once, each through the part script,
    and the lanes run at once."""
    script = (REPO / "scripts" / "test.sh").read_text()
    assert 'bash scripts/test_part.sh "$@"' in script
    selections = dict(re.findall(r'^(APACHE_PART|DEV_PART)="(.+?)"', script, flags=re.M))
    assert set(selections) == {"APACHE_PART", "DEV_PART"}, selections
    runs = re.findall(
        r'^\s*run_part --kafka=(\w+) -m "\$(\w+) and (spark|not spark)"(.*)$', script, flags=re.M
    )
    assert sorted(runs) == [
        ("apache", "APACHE_PART", "not spark", ' "${AIRFLOW2_LANE[@]/#/--ignore=}"'),
        ("apache", "APACHE_PART", "not spark", ' "${AIRFLOW2_LANE[@]}"'),
        ("apache", "APACHE_PART", "spark", ' "${AIRFLOW2_LANE_SPARK[@]}"'),
        ("apache", "APACHE_PART", "spark", ' "${AIRFLOW_LANE_SPARK[@]}"'),
        (
            "apache",
            "APACHE_PART",
            "spark",
            ' "${REST_LANE_SPARK[@]/#/--ignore=}"'
            ' "${AIRFLOW_LANE_SPARK[@]/#/--ignore=}" "${AIRFLOW2_LANE_SPARK[@]/#/--ignore=}"',
        ),
        ("apache", "APACHE_PART", "spark", ' "${REST_LANE_SPARK[@]}"'),
        ("dev", "DEV_PART", "not spark", ""),
        ("dev", "DEV_PART", "spark", ' "${AIRFLOW2_LANE_DEV_SPARK[@]/#/--ignore=}"'),
        ("dev", "DEV_PART", "spark", ' "${AIRFLOW2_LANE_DEV_SPARK[@]}"'),
    ], runs
    lanes = ("REST_LANE_SPARK", "AIRFLOW_LANE_SPARK", "AIRFLOW2_LANE", "AIRFLOW2_LANE_SPARK",
             "AIRFLOW2_LANE_DEV_SPARK")  # fmt: skip
    for lane in lanes:
        listed = re.search(rf"^{lane}=\(\n(.*?)\n\)", script, flags=re.M | re.S)
        assert listed, f"{lane}=( one path per line )"
        for path in listed.group(1).split():
            assert (REPO / path).is_file(), f"{lane} names {path}, which does not exist"
    assert "spark_lane ||" in script
    for lane in ("rest", "airflow", "airflow2"):
        assert re.search(rf"^{lane}_lane .*&$", script, flags=re.M), lane
        assert f'wait "${lane}_pid"' in script, lane


# -- strict markers and the skip budget ----------------------------------------------------------

SKIPPING = """
import pytest

def test_runs():
    pass

def test_skips():
    pytest.skip("no widget here")

@pytest.mark.parametrize("n", [1, 2])
def test_param(n):
    pytest.skip("not today")

@pytest.mark.xfail(strict=True, reason="known")
def test_xfails():
    assert False
"""


def _budget_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """pytest on a throwaway test module with tests/conftest.py loaded as the plugin (its
    --skip-budget option and hooks), outside the suite's own configuration."""
    (tmp_path / "test_budget.py").write_text(SKIPPING)
    (tmp_path / "test_gone.py").write_text('import pytest\npytest.importorskip("no_such_mod_x")\n')
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    return subprocess.run(
        [str(REPO / ".venv" / "bin" / "pytest"), "-p", "conftest", "-p", "no:cacheprovider",
         "-q", "-rs", *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**OWN_ENV, "PYTHONPATH": str(REPO / "tests")},
    )  # fmt: skip


def test_a_skip_not_on_the_allowlist_fails_the_run_and_is_named(tmp_path: Path) -> None:
    allow = tmp_path / "allow.txt"
    allow.write_text("# nothing may skip\n")
    done = _budget_run(tmp_path, f"--skip-budget={allow}")
    assert done.returncode == 1, done.stdout[-3000:]
    assert "skip budget: 4 test(s) skipped" in done.stdout, done.stdout[-3000:]
    assert "test_budget.py::test_skips: Skipped: no widget here" in done.stdout
    assert "test_budget.py::test_param[2]" in done.stdout
    assert "test_gone.py: " in done.stdout  # a whole module skipped counts too
    assert "test_xfails" not in done.stdout.split("skip budget:")[1]  # an xfail is no skip


def test_skips_on_the_allowlist_pass_and_without_the_budget_any_skip_passes(
    tmp_path: Path,
) -> None:
    allow = tmp_path / "allow.txt"
    allow.write_text(
        "# why each may skip\n"
        "test_budget.py::test_skips  # a test\n"
        "test_budget.py::test_param\n"  # all its parametrizations
        "test_gone.py\n"  # a file
    )
    done = _budget_run(tmp_path, f"--skip-budget={allow}")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "skip budget" not in done.stdout
    allow.write_text("test_budget.py::test_skips\ntest_gone.py\n")
    done = _budget_run(tmp_path, f"--skip-budget={allow}")
    assert done.returncode == 1, done.stdout[-3000:]
    assert "skip budget: 2 test(s)" in done.stdout
    assert _budget_run(tmp_path).returncode == 0  # a developer's own run: no budget


def test_ci_parts_run_with_the_skip_budget_and_its_entries_name_real_tests() -> None:
    part = (REPO / "scripts" / "test_part.sh").read_text()
    assert "--skip-budget=tests/skip_allowlist.txt" in part
    allowlist = REPO / "tests" / "skip_allowlist.txt"
    entries = [line.split("#", 1)[0].strip() for line in allowlist.read_text().splitlines()]
    entries = [e for e in entries if e]
    assert entries, "the allow-list names the docker-stack system tests"
    text = allowlist.read_text()
    for entry in entries:
        path, _, name = entry.partition("::")
        assert (REPO / path).is_file(), f"skip_allowlist.txt names {path}, which does not exist"
        assert not name or f"def {name.split('::')[-1]}(" in (REPO / path).read_text(), entry
        before = text[: text.index(entry)].rstrip().splitlines()
        assert before and before[-1].startswith("#"), f"{entry}: give the reason in a comment"


def test_markers_are_strict_a_misspelt_one_is_an_error(tmp_path: Path) -> None:
    test = tmp_path / "test_misspelt.py"
    test.write_text("import pytest\n\n@pytest.mark.dev_cii\ndef test_x():\n    pass\n")
    done = subprocess.run(
        [str(REPO / ".venv" / "bin" / "pytest"), "-c", str(REPO / "pyproject.toml"),
         "--rootdir", str(tmp_path), "-p", "no:cacheprovider", "--collect-only", "-q", str(test)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=OWN_ENV,
    )  # fmt: skip
    assert done.returncode != 0, done.stdout[-2000:]
    assert "'dev_cii' not found in `markers` configuration option" in done.stdout + done.stderr
