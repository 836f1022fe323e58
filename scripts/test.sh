#!/usr/bin/env bash
# Set up .venv (idempotent) and run the whole test suite: lint, then pytest.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh tests/core -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if ! command -v java >/dev/null 2>&1; then
    echo "error: no 'java' on PATH - Spark tests need Java 17+; install it (e.g. apt-get install openjdk-17-jre-headless) and rerun" >&2
    exit 2
fi
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
export PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
echo "[test] ruff check"
.venv/bin/ruff check airflow_samza_expand dags tests benchmarks
echo "[test] pytest"
exec .venv/bin/pytest "$@"
