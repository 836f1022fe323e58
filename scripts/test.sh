#!/usr/bin/env bash
# Set up .venv (idempotent) and run the whole test suite: lint (ruff, the layering contract),
# then pytest in two parts:
#   1. tests/kafka_layer, tests/airflow, tests/e2e, tests/kafka on Apache Kafka (started by the
#      fixtures from the Maven-fetched broker; marker apache_ci), minus the dev-broker fault tests;
#   2. everything else, and those fault tests, on the development broker.
# With arguments, one pytest run with them instead, e.g. `bash scripts/test.sh tests/core -x`
# (pick the Kafka with --kafka=dev|apache or SAMZA_EXPAND_TEST_KAFKA).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if ! command -v java >/dev/null 2>&1; then
    echo "error: no 'java' on PATH - Spark tests need Java 17+; install it (e.g. apt-get install openjdk-17-jre-headless) and rerun" >&2
    exit 2
fi
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
export PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"  # driver and UI on loopback, not the host address
echo "[test] ruff check"
.venv/bin/ruff check airflow_samza_expand dags tests benchmarks
echo "[test] lint-imports (the layering contract in pyproject.toml, DESIGN section 2)"
.venv/bin/lint-imports --no-cache
if [ $# -gt 0 ]; then
    echo "[test] pytest $*"
    exec .venv/bin/pytest "$@"
fi
if ! command -v mvn >/dev/null 2>&1; then
    echo "error: no 'mvn' on PATH - the tests fetch Apache Kafka with Maven; install it (e.g. apt-get install maven) and rerun" >&2
    exit 2
fi
status=0
run_part() {  # a part that selects nothing fails too (scripts/test_part.sh)
    local rc=0
    bash scripts/test_part.sh "$@" || rc=$?
    if [ "$rc" -ne 0 ]; then status=$rc; fi
}
echo "[test] pytest part 1/2: Kafka layer, Airflow, end-to-end and conformance tests on Apache Kafka"
run_part --kafka=apache -m "apache_ci and not dev_broker"
echo "[test] pytest part 1/2 done (status $status); part 2/2: the rest on the development broker"
run_part --kafka=dev -m "not apache_ci or dev_broker"
exit "$status"
