#!/usr/bin/env bash
# Set up .venv (idempotent) and run the whole test suite: lint (ruff, the layering contract),
# then pytest in two parts, each split into two lanes that run at once (Spark / the rest):
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
# Two lanes at once (2 cores): the Spark lane (tests marked `spark`: each starts JVMs and
# keeps a core busy) and the rest (Kafka round trips, Airflow's database, the browser: mostly
# waiting). Each lane runs its Apache Kafka part, then its development-broker part; the lanes
# share nothing but the machine (own pytest process, own brokers, own Airflow home, own
# session sweep). The Spark lane prints live; the other lane's output follows when both end.
run_part() {  # a part that selects nothing fails too (scripts/test_part.sh)
    local rc=0
    bash scripts/test_part.sh "$@" || rc=$?
    if [ "$rc" -ne 0 ]; then lane_status=$rc; fi
}
lane() {  # lane <name> <marker>: the lane's Apache Kafka part, then its dev-broker part
    lane_status=0
    echo "[test] $1 lane 1/2: on Apache Kafka"
    run_part --kafka=apache -m "apache_ci and not dev_broker and $2"
    echo "[test] $1 lane 2/2: on the development broker"
    run_part --kafka=dev -m "(not apache_ci or dev_broker) and $2"
    return "$lane_status"
}
rest_log="$(mktemp -t samza-expand-rest-lane-XXXXXX.log)"
started=$SECONDS
echo "[test] pytest in two lanes; the rest lane writes to $rest_log (printed below when done)"
lane rest "not spark" >"$rest_log" 2>&1 &
rest_pid=$!
trap 'kill "$rest_pid" 2>/dev/null || true' EXIT
spark_rc=0
lane spark "spark" || spark_rc=$?
echo "[test] spark lane done in $((SECONDS - started)) s (status $spark_rc); waiting for the rest lane"
rest_rc=0
wait "$rest_pid" || rest_rc=$?
trap - EXIT
echo "[test] ---- rest lane output ----"
cat "$rest_log"
rm -f "$rest_log"
echo "[test] rest lane status $rest_rc; both lanes done in $((SECONDS - started)) s"
if [ "$spark_rc" -ne 0 ]; then exit "$spark_rc"; fi
exit "$rest_rc"
