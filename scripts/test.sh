#!/usr/bin/env bash
# Set up .venv (idempotent) and run the whole test suite: lint (ruff, the layering contract),
# then pytest in two parts, run as four lanes at once (see below: Spark / two Airflow / the rest):
#   1. the folders of APACHE_CI_DIRS in tests/conftest.py on Apache Kafka (started by the
#      fixtures from the Maven-fetched broker; marker apache_ci), minus the dev-broker fault tests;
#   2. everything else, those fault tests, and the few part-1 tests marked dev_ci (their subject
#      is not the Kafka: a Spark standalone cluster, a join) on the development broker.
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
# Test JVMs are short-lived: the client JIT only, the serial GC and a class-data-sharing archive
# of Spark's classes recorded once per machine (airflow_samza_expand/_testing/spark_cds.py, which
# prints the options: 30% less CPU for a short Spark session, 3-7% of a Spark test) - on two
# cores the lanes wait on each other's CPU. spark-submit passes SPARK_SUBMIT_OPTS to the JVM
# that runs a local[*] driver; a user's own setting wins.
if [ -z "${SPARK_SUBMIT_OPTS:-}" ]; then
    SPARK_SUBMIT_OPTS="$(.venv/bin/python -m airflow_samza_expand._testing.spark_cds)"
    export SPARK_SUBMIT_OPTS
fi
# The test brokers (Apache Kafka, _testing/apache_kafka_process.py) take the same lean JIT/GC
# options through Kafka's own variable: a third less broker CPU in an e2e test (28 -> 18 CPU-s)
export KAFKA_JVM_PERFORMANCE_OPTS="${KAFKA_JVM_PERFORMANCE_OPTS:--XX:TieredStopAtLevel=1 -XX:+UseSerialGC}"
echo "[test] ruff check"
.venv/bin/ruff check airflow_samza_expand dags tests benchmarks
echo "[test] lint-imports (the layering contract in pyproject.toml, docs/design.md 'The layers')"
.venv/bin/lint-imports --no-cache
if [ $# -gt 0 ]; then
    echo "[test] pytest $*"
    exec .venv/bin/pytest "$@"
fi
if ! command -v mvn >/dev/null 2>&1; then
    echo "error: no 'mvn' on PATH - the tests fetch Apache Kafka with Maven; install it (e.g. apt-get install maven) and rerun" >&2
    exit 2
fi
# Four lanes at once (2 cores): the Spark lane (the tests marked `spark` of part 1: the e2e
# tests, each starting JVMs and keeping a core busy), two Airflow lanes (part 1's other tests,
# split by file: whole DAG runs in processes of their own, Kafka round trips, lease expiries -
# mostly waiting, so two pytest processes overlap their waits) and the rest lane (part 2, whose
# Spark tests are short and come last). Each lane but the Spark lane then runs a few of part
# 1's Spark modules by path (REST_LANE_SPARK, AIRFLOW_LANE_SPARK, AIRFLOW2_LANE_SPARK), which
# the Spark lane ignores, so that the four end near the same time. The lanes share
# nothing but the machine (own pytest process per part, own brokers, own Airflow home, own
# session sweep). The Spark lane prints live; the other lanes' output follows when all end.
APACHE_PART="apache_ci and not dev_broker and not dev_ci"  # part 1, on Apache Kafka
DEV_PART="(not apache_ci or dev_broker or dev_ci)"  # part 2, on the development broker
# Part 1's Spark tests that the rest lane runs, on Apache Kafka, after its own two runs
REST_LANE_SPARK=(
    tests/e2e/test_e2e_user_job.py
)
# Part 1's Spark tests that the Airflow lane runs after its own part
AIRFLOW_LANE_SPARK=(
    tests/airflow/test_airflow_cluster_fault.py
    tests/e2e/test_e2e_order.py
    tests/e2e/test_e2e_two_streams.py
)
# Part 1's tests without Spark that the second Airflow lane runs (the first ignores them): the
# slowest DAG-run modules, about half the part's time
AIRFLOW2_LANE=(
    tests/airflow/test_airflow_faults.py
    tests/airflow/test_airflow_ownership.py
    tests/airflow/test_airflow_triggerer_kill.py
    tests/airflow/test_airflow_readers.py
    tests/airflow/test_airflow_policy.py
)
# Part 1's Spark tests that the second Airflow lane runs after its part
AIRFLOW2_LANE_SPARK=(
    tests/e2e/test_e2e_reliability.py
    tests/e2e/test_e2e_restart_task.py
    tests/e2e/test_e2e_multi_job.py
    tests/e2e/test_e2e_growth_outside_airflow.py
    tests/e2e/test_e2e_adoption.py
)
# Part 2's Spark tests that the second Airflow lane runs after those (the rest lane ignores them)
AIRFLOW2_LANE_DEV_SPARK=(
    tests/integration/secured/test_secured_e2e.py
)
run_part() {  # a part that selects nothing fails too (scripts/test_part.sh)
    local rc=0
    bash scripts/test_part.sh "$@" || rc=$?
    if [ "$rc" -ne 0 ]; then lane_status=$rc; fi
}
spark_lane() {
    lane_status=0
    echo "[test] spark lane: part 1's Spark tests, on Apache Kafka (but ${REST_LANE_SPARK[*]} ${AIRFLOW_LANE_SPARK[*]} ${AIRFLOW2_LANE_SPARK[*]})"
    run_part --kafka=apache -m "$APACHE_PART and spark" "${REST_LANE_SPARK[@]/#/--ignore=}" "${AIRFLOW_LANE_SPARK[@]/#/--ignore=}" "${AIRFLOW2_LANE_SPARK[@]/#/--ignore=}"
    return "$lane_status"
}
airflow_lane() {
    lane_status=0
    echo "[test] airflow lane 1/2: part 1 without Spark (but ${AIRFLOW2_LANE[*]}), on Apache Kafka"
    run_part --kafka=apache -m "$APACHE_PART and not spark" "${AIRFLOW2_LANE[@]/#/--ignore=}"
    echo "[test] airflow lane 2/2: part 1's Spark tests in ${AIRFLOW_LANE_SPARK[*]}, on Apache Kafka"
    run_part --kafka=apache -m "$APACHE_PART and spark" "${AIRFLOW_LANE_SPARK[@]}"
    return "$lane_status"
}
airflow2_lane() {
    lane_status=0
    echo "[test] second airflow lane 1/3: part 1 without Spark in ${AIRFLOW2_LANE[*]}, on Apache Kafka"
    run_part --kafka=apache -m "$APACHE_PART and not spark" "${AIRFLOW2_LANE[@]}"
    echo "[test] second airflow lane 2/3: part 1's Spark tests in ${AIRFLOW2_LANE_SPARK[*]}, on Apache Kafka"
    run_part --kafka=apache -m "$APACHE_PART and spark" "${AIRFLOW2_LANE_SPARK[@]}"
    echo "[test] second airflow lane 3/3: part 2's Spark tests in ${AIRFLOW2_LANE_DEV_SPARK[*]}, on the development broker"
    run_part --kafka=dev -m "$DEV_PART and spark" "${AIRFLOW2_LANE_DEV_SPARK[@]}"
    return "$lane_status"
}
rest_lane() {
    lane_status=0
    echo "[test] rest lane 1/3: part 2 without Spark, on the development broker"
    run_part --kafka=dev -m "$DEV_PART and not spark"
    echo "[test] rest lane 2/3: part 2's Spark tests (but ${AIRFLOW2_LANE_DEV_SPARK[*]}), on the development broker"
    run_part --kafka=dev -m "$DEV_PART and spark" "${AIRFLOW2_LANE_DEV_SPARK[@]/#/--ignore=}"
    echo "[test] rest lane 3/3: part 1's Spark tests in ${REST_LANE_SPARK[*]}, on Apache Kafka"
    run_part --kafka=apache -m "$APACHE_PART and spark" "${REST_LANE_SPARK[@]}"
    return "$lane_status"
}
airflow_log="$(mktemp -t samza-expand-airflow-lane-XXXXXX.log)"
airflow2_log="$(mktemp -t samza-expand-airflow2-lane-XXXXXX.log)"
rest_log="$(mktemp -t samza-expand-rest-lane-XXXXXX.log)"
SAMZA_EXPAND_JUNIT_DIR="${SAMZA_EXPAND_JUNIT_DIR:-$(mktemp -d -t samza-expand-junit-XXXXXX)}"
export SAMZA_EXPAND_JUNIT_DIR  # every test's time, a JUnit XML per part (scripts/test_part.sh)
started=$SECONDS
echo "[test] every test's time goes to $SAMZA_EXPAND_JUNIT_DIR (JUnit XML per part)"
echo "[test] pytest in four lanes; the airflow lanes and the rest lane write to $airflow_log, $airflow2_log and $rest_log (printed below when done)"
airflow_lane >"$airflow_log" 2>&1 &
airflow_pid=$!
airflow2_lane >"$airflow2_log" 2>&1 &
airflow2_pid=$!
rest_lane >"$rest_log" 2>&1 &
rest_pid=$!
trap 'kill "$airflow_pid" "$airflow2_pid" "$rest_pid" 2>/dev/null || true' EXIT
spark_rc=0
spark_lane || spark_rc=$?
echo "[test] spark lane done in $((SECONDS - started)) s (status $spark_rc); waiting for the other lanes"
airflow_rc=0
wait "$airflow_pid" || airflow_rc=$?
echo "[test] airflow lane done at $((SECONDS - started)) s (status $airflow_rc)"
airflow2_rc=0
wait "$airflow2_pid" || airflow2_rc=$?
echo "[test] second airflow lane done at $((SECONDS - started)) s (status $airflow2_rc)"
rest_rc=0
wait "$rest_pid" || rest_rc=$?
trap - EXIT
echo "[test] ---- airflow lane output ----"
cat "$airflow_log"
echo "[test] ---- second airflow lane output ----"
cat "$airflow2_log"
echo "[test] ---- rest lane output ----"
cat "$rest_log"
rm -f "$airflow_log" "$airflow2_log" "$rest_log"
echo "[test] rest lane status $rest_rc; all lanes done in $((SECONDS - started)) s"
for rc in "$spark_rc" "$airflow_rc" "$airflow2_rc" "$rest_rc"; do
    if [ "$rc" -ne 0 ]; then exit "$rc"; fi
done
exit 0
