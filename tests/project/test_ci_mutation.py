"""scripts/mutation.sh, the mutation testing of the decisions, runs: on a tiny subset (three
mutants of the outcome gate's rule) it kills them and ends on ``mutants_killed=<k>/<n>``; a
survivor is named so that tests/mutation_equivalent.txt can list it with its reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import mutation  # noqa: E402


def test_the_mutation_script_runs_a_tiny_subset_and_prints_its_figure_last() -> None:
    done = subprocess.run(
        ["bash", "scripts/mutation.sh", "--only", "outcome", "--limit", "3", "--lanes", "1"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == "mutants_killed=3/3", done.stdout
    assert lines[0] == "outcome gate (_protocol/outcome.py): killed 3/3, equivalent 0"


def test_every_target_names_what_its_module_defines_and_tests_that_exist() -> None:
    for target in mutation.TARGETS:
        source = (REPO / mutation.PKG / target.module).read_text()
        assert mutation.scope_lines(source, target.scope), target.name
        for test in target.tests:
            assert (REPO / test).is_file(), (target.name, test)


def test_a_survivor_is_named_by_its_function_and_its_lines_and_listed_ones_are_read() -> None:
    source = "def f(x):\n    return x < 2\n"
    diff = "--- a\n+++ b\n@@ -2 +2 @@\n-    return x < 2\n+    return x <= 2\n"
    key = mutation.mutant_key("m.py", source, 2, diff)
    assert key == "m.py f: return x < 2 -> return x <= 2"
    listed = mutation.equivalent()
    for line in mutation.EQUIVALENT.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            assert "  # " in line, f"no reason given: {line}"
            assert line.rsplit("  # ", 1)[0].strip() in listed
