#!/usr/bin/env bash
# One part of the suite: pytest with the given arguments, the 30 slowest tests listed
# (--durations), and a part that selects no test is a failure (pytest's exit 5): a broken
# marker must not silently empty a part of CI. A test that skips fails the part unless
# tests/skip_allowlist.txt names it (the skip budget, tests/conftest.py); markers are strict
# (pyproject.toml). Called by scripts/test.sh; needs .venv.
set -uo pipefail
cd "$(dirname "$0")/.."
rc=0
# Every test's time, for balancing the lanes: a JUnit XML per part when SAMZA_EXPAND_JUNIT_DIR
# names a directory (scripts/test.sh sets it to a temporary one and prints where)
junit=()
if [ -n "${SAMZA_EXPAND_JUNIT_DIR:-}" ]; then
    junit=(--junitxml "$(mktemp -p "$SAMZA_EXPAND_JUNIT_DIR" part-XXXXXX.xml)")
fi
.venv/bin/pytest --durations=30 --skip-budget=tests/skip_allowlist.txt "${junit[@]}" "$@" || rc=$?
if [ "$rc" -eq 5 ]; then
    echo "[test] error: this part selected no test (pytest $*) - check its -m marker expression and paths" >&2
fi
exit "$rc"
