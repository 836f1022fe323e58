#!/usr/bin/env bash
# Regenerate constraints.txt, the lock file every install uses (like Airflow's constraints files).
set -euo pipefail
cd "$(dirname "$0")/.."
uv pip compile pyproject.toml --extra spark --extra testing --extra dev --extra openlineage --extra cncf-kubernetes --extra databricks \
    --constraint constraints.in --python-version 3.11 --no-header --no-annotate \
    -o constraints.txt
