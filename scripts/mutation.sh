#!/usr/bin/env bash
# Mutation testing of the decisions (cosmic-ray, pinned in constraints.txt through the dev
# extra): the record's state machine, the steps' refusals, the outcome gate, the barrier's
# pass and snapshot rules, the stale-placement rule, the restart choice, the groupers, the
# expansion algorithm and the job-model validation, each against its fast, pure tests
# (scripts/mutation.py lists them). CPU heavy: it runs niced. The last line printed is
# `mutants_killed=<k>/<n>`; a survivor is killed by a test or listed, with the reason it is
# equivalent, in tests/mutation_equivalent.txt (docs/testing.md, "Mutation testing").
#   bash scripts/mutation.sh                       # every target (about 15-25 min on 2 cores)
#   bash scripts/mutation.sh --only groupers       # the targets whose name contains "groupers"
#   bash scripts/mutation.sh --only outcome --limit 5   # a quick look: 5 mutants a target
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/cosmic-ray ]; then
    bash scripts/setup.sh  # installs the dev extra, cosmic-ray with it
fi
exec nice -n 10 .venv/bin/python scripts/mutation.py "$@"
