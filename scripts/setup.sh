#!/usr/bin/env bash
# Create .venv/ in the repo root and install this package with every extra, pinned by constraints.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "[setup] creating .venv with $($PY --version)"
    "$PY" -m venv .venv
fi
if [ ! -x .venv/bin/uv ]; then
    echo "[setup] installing uv (fast, lock-respecting installer) into .venv"
    .venv/bin/python -m pip install --quiet --disable-pip-version-check "uv==0.13.9"
fi
echo "[setup] installing airflow-samza-expand[spark,testing,dev,openlineage] with constraints.txt"
VIRTUAL_ENV="$PWD/.venv" .venv/bin/uv pip install --quiet --python .venv/bin/python \
    --compile-bytecode -c constraints.txt -e ".[spark,testing,dev,openlineage]"
# Bytecode for every process the demo and the tests start (_testing/bytecode.py: site-packages
# once, pyspark's zips that Spark puts first on its Python processes' path, this checkout)
.venv/bin/python -m airflow_samza_expand._testing.bytecode airflow_samza_expand dags tests benchmarks
# tests/airflow/ui drive a real headless Chromium (Debian's package; never downloaded at test time)
if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "[setup] installing Debian's chromium for the UI tests (apt-get)"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends chromium fonts-dejavu-core >/dev/null
    else
        echo "[setup] note: no chromium - the browser tests in tests/airflow/ui skip (as root, setup installs it)"
    fi
fi
if command -v mvn >/dev/null 2>&1 && command -v java >/dev/null 2>&1; then
    echo "[setup] Apache Kafka for tests: the broker pinned in airflow_samza_expand/_testing/apache_kafka/pom.xml (Maven, cached)"
    .venv/bin/samza-expand dev apache-kafka --fetch-only
    echo "[setup] Spark's Kafka connector for read_kafka() (spark-sql-kafka-0-10 of the installed pyspark; Maven, cached)"
    .venv/bin/samza-expand dev spark-kafka-jars --fetch-only
else
    echo "[setup] note: no mvn or java on PATH - the tests on Apache Kafka and Spark's Kafka source need both (apt-get install maven openjdk-17-jre-headless)"
fi
echo "[setup] done: $(.venv/bin/python --version), $(.venv/bin/python -c 'import airflow; print("airflow", airflow.__version__)' 2>/dev/null)"
