"""Mutation testing of the decisions with cosmic-ray (run by scripts/mutation.sh).

Each target is a module, the decisions in it (functions, methods or module-level tables by
name; a mutant elsewhere in the module is skipped) and the fast, pure tests that hold them.
The package and the tests are copied to a temporary directory first: cosmic-ray mutates the
files it tests in place, and the working tree is shared. A surviving mutant is either killed
by a new test or listed in tests/mutation_equivalent.txt with the reason it is equivalent
(``<module> <qualname>: <line before> -> <line after>  # reason``, one a line).

Prints per target its killed/total and each survivor not listed, and as its last line
``mutants_killed=<k>/<n>`` (n: every mutant run, less the listed equivalent ones)."""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EQUIVALENT = REPO / "tests" / "mutation_equivalent.txt"
PKG = "airflow_samza_expand"
# The operators whose mutants say something about a decision: comparisons, boolean operators
# and constants, numbers, arithmetic between +, -, * and /, unary operators, break/continue
# and a loop that runs zero times (not == against `is`, below). The other binary replacements
# (a + b -> a ** b, a << b, a ^ b ...) multiply the count with mutants any test kills.
EXCLUDED_OPERATORS = [
    r"core/ReplaceBinaryOperator_.*_(Pow|RShift|LShift|BitOr|BitAnd|BitXor|Mod|FloorDiv)$",
    r"core/ReplaceBinaryOperator_(Pow|RShift|LShift|BitOr|BitAnd|BitXor|Mod|FloorDiv)_.*",
    # == against `is` on enum members, small ints and interned strings: the same in CPython
    r"core/ReplaceComparisonOperator_(Eq|NotEq)_(Is|IsNot)$",
    r"core/ExceptionReplacer",
    r"core/RemoveDecorator",
    r"core/VariableInserter",
    r"core/VariableReplacer",
]


@dataclass(frozen=True)
class Target:
    """`module` (under the package), the names mutated in it, the tests that hold them."""

    name: str
    module: str
    scope: tuple[str, ...]
    tests: tuple[str, ...]


TARGETS = (
    Target(
        "record state machine", "core/_record.py",
        ("TRANSITIONS", "ORDER", "ExpansionRecord.reached", "ExpansionRecord.may_reach",
         "ExpansionRecord.check_successor", "ExpansionRecord.advance",
         "ExpansionRecord.grown_counts"),
        ("tests/core/test_core_record.py", "tests/core/test_core_record_machine.py"),
    ),
    Target(
        "step refusals", "_protocol/records.py",
        ("reached", "mark", "check_reachable", "check_after"),
        ("tests/core/test_core_record_machine.py", "tests/protocol/test_protocol_rules.py"),
    ),
    Target(
        "outcome gate", "_protocol/outcome.py", ("gaps", "_behind", "_ran"),
        ("tests/protocol/test_protocol_rules.py",),
    ),
    Target(
        "barrier pass rule", "_protocol/barrier/reads.py", ("compute_status",),
        ("tests/protocol/test_protocol_rules.py",),
    ),
    Target(
        "barrier snapshot rule", "_protocol/barrier/rule.py",
        ("decide_snapshot", "job_coverage", "next_target"),
        ("tests/core/test_core_decision_bounds.py", "tests/core/test_core_order.py",
         "tests/core/test_core_job_stale_count.py"),
    ),
    Target(
        "stale-placement rule", "core/_stale.py",
        ("check_growth", "stale_target", "is_stale_placement", "placed_with", "check_chain",
         "stale_in_chain"),
        ("tests/core/test_core_decision_bounds.py", "tests/core/test_core_stale.py"),
    ),
    Target(
        "restart choice", "_protocol/restart/__init__.py", ("choose_restart",),
        ("tests/protocol/test_protocol_restart.py", "tests/protocol/test_protocol_warm.py"),
    ),
    Target(
        "groupers", "core/groupers.py", (),
        ("tests/core/test_core_grouper_bounds.py", "tests/core/test_core_groupers.py"),
    ),
    Target(
        "expansion algorithm", "core/expansion.py",
        ("DefaultPartitionExpansionAlgorithm", "is_power_of_two", "validate_growth"),
        ("tests/core/test_core_grouper_bounds.py", "tests/core/test_core_expansion.py"),
    ),
    Target(
        "job-model validation", "core/_validate.py", (),
        ("tests/core/test_core_validate_bounds.py", "tests/core/test_core_validate.py",
         "tests/core/test_core_model.py"),
    ),
)  # fmt: skip


def scope_lines(source: str, names: tuple[str, ...]) -> list[tuple[int, int]]:
    """The line ranges of `names` (qualified: ``Class.method``) in `source`; all of it when
    `names` is empty."""
    if not names:
        return [(1, len(source.splitlines()))]
    found: dict[str, tuple[int, int]] = {}

    def visit(nodes: list[ast.stmt], prefix: str) -> None:
        for node in nodes:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                found[prefix + node.name] = (node.lineno, node.end_lineno or node.lineno)
                if isinstance(node, ast.ClassDef):
                    visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, ast.Assign | ast.AnnAssign) and not prefix:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        found[t.id] = (node.lineno, node.end_lineno or node.lineno)

    visit(ast.parse(source).body, "")
    missing = [n for n in names if n not in found]
    if missing:
        raise SystemExit(f"mutation targets name what the module does not define: {missing}")
    return [found[n] for n in names]


def qualname_at(source: str, line: int) -> str:
    """The innermost function or class around `line` (``<module>`` outside any)."""
    best = "<module>"

    def visit(nodes: list[ast.stmt], prefix: str) -> None:
        nonlocal best
        for node in nodes:
            around = node.lineno <= line <= (node.end_lineno or node.lineno)
            if around and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                best = prefix + node.name
                visit(node.body, f"{prefix}{node.name}.")

    visit(ast.parse(source).body, "")
    return best


def mutant_key(module: str, source: str, line: int, diff: str) -> str:
    """``<module> <qualname>: <line before> -> <line after>``: a survivor's name that stays
    when lines move."""
    removed = [d[1:].strip() for d in diff.splitlines() if d.startswith("-") and d[1:2] != "-"]
    added = [d[1:].strip() for d in diff.splitlines() if d.startswith("+") and d[1:2] != "+"]
    return f"{module} {qualname_at(source, line)}: {' '.join(removed)} -> {' '.join(added)}"


def equivalent() -> set[str]:
    if not EQUIVALENT.exists():
        return set()
    keys = set()
    for raw in EQUIVALENT.read_text().splitlines():
        if raw.strip() and not raw.startswith("#"):
            keys.add(raw.rsplit("  # ", 1)[0].strip())  # the reason is last
    return keys


def _run(cmd: list[str], cwd: Path) -> None:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def _test_command(tests: tuple[str, ...]) -> str:
    """pytest on `tests` (their Kafka and Spark tests left out), stopping at the first failure."""
    return (
        f"{sys.executable} -m pytest -x -q -p no:cacheprovider -m 'not kafka and not spark' "
        + " ".join(tests)
    )


def _config(target: Target, work: Path, tests: tuple[str, ...]) -> Path:
    cfg = work / f"{target.module.replace('/', '_')}.toml"
    test_cmd = _test_command(tests)
    excluded = ", ".join(f"'{p}'" for p in EXCLUDED_OPERATORS)
    cfg.write_text(
        "[cosmic-ray]\n"
        f"module-path = '{PKG}/{target.module}'\n"
        "timeout = 120.0\n"
        "excluded-modules = []\n"
        f'test-command = "{test_cmd}"\n'
        "[cosmic-ray.distributor]\nname = 'local'\n"
        f"[cosmic-ray.filters.operators-filter]\nexclude-operators = [{excluded}]\n"
    )
    return cfg


def _skip_outside(session: Path, ranges: list[tuple[int, int]], limit: int | None) -> None:
    """Mark every mutant outside `ranges` (and past the first `limit`) skipped."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    with use_db(str(session), WorkDB.Mode.open) as db:
        items = sorted(db.pending_work_items, key=lambda i: (i.mutations[0].start_pos, i.job_id))
        inside = [i.job_id for i in items if any(a <= i.mutations[0].start_pos[0] <= b
                                                  for a, b in ranges)]  # fmt: skip
        keep = set(inside[:limit] if limit is not None else inside)
        skipped = WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output="not a decision")
        db.set_multiple_results([i.job_id for i in items if i.job_id not in keep], skipped)


def run_target(
    target: Target, work: Path, limit: int | None, count: bool = False
) -> list[tuple[str, str]]:
    """(outcome, key) of each mutant run of `target`."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    source = (work / PKG / target.module).read_text()
    cfg = _config(target, work, target.tests)
    session = work / f"{target.module.replace('/', '_')}.sqlite"
    bin_dir = Path(sys.executable).parent
    baseline = subprocess.run(_test_command(target.tests), cwd=work, shell=True,
                              capture_output=True, text=True)  # fmt: skip
    if baseline.returncode != 0:  # else every mutant would count as killed
        raise SystemExit(f"the tests of {target.name!r} fail unmutated:\n{baseline.stdout[-3000:]}")
    _run([str(bin_dir / "cosmic-ray"), "init", str(cfg), str(session)], work)
    _run([str(bin_dir / "cr-filter-operators"), str(session), str(cfg)], work)
    _skip_outside(session, scope_lines(source, target.scope), limit)
    if count:
        with use_db(str(session), WorkDB.Mode.open) as db:
            return [("pending", "") for _ in db.pending_work_items]
    _run([str(bin_dir / "cosmic-ray"), "exec", str(cfg), str(session)], work)
    out = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        rows = {i.job_id: i.mutations[0].start_pos[0] for i in db.work_items}
        for job_id, result in db.results:
            if result.worker_outcome == WorkerOutcome.SKIPPED:
                continue
            survived = (
                result.worker_outcome == WorkerOutcome.NORMAL
                and result.test_outcome == TestOutcome.SURVIVED
            )
            key = mutant_key(target.module, source, rows[job_id], result.diff or "")
            out.append(("survived" if survived else "killed", key))
    return out


def _copy_tree(work: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / PKG, work / PKG, ignore=ignore)
    shutil.copytree(REPO / "tests", work / "tests", ignore=ignore)
    shutil.copy(REPO / "pyproject.toml", work / "pyproject.toml")


def _weight(target: Target) -> int:
    """About how many mutants `target` has: the operators and constants in its scope."""
    source = (REPO / PKG / target.module).read_text()
    ranges = scope_lines(source, target.scope)
    kinds = ast.Compare | ast.BoolOp | ast.BinOp | ast.UnaryOp | ast.Constant
    return sum(
        1
        for node in ast.walk(ast.parse(source))
        if isinstance(node, kinds) and any(a <= node.lineno <= b for a, b in ranges)
    )


def _lane(targets: list[Target], limit: int | None, count: bool) -> dict[str, list]:
    """Run `targets` one after another in a copy of the tree of their own."""
    with tempfile.TemporaryDirectory(prefix="samza-mutation-") as tmp:
        work = Path(tmp)
        _copy_tree(work)
        return {t.name: run_target(t, work, limit, count) for t in targets}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run the targets whose name contains this")
    parser.add_argument("--limit", type=int, help="run at most this many mutants a target")
    parser.add_argument("--count", action="store_true", help="count the mutants, run none")
    parser.add_argument("--lanes", type=int, default=3, help="targets run in this many lanes")
    args = parser.parse_args(argv)
    targets = [t for t in TARGETS if not args.only or args.only in t.name]
    if not targets:
        raise SystemExit(f"no target named like {args.only!r}: {[t.name for t in TARGETS]}")
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    lanes: list[list[Target]] = [[] for _ in range(max(1, args.lanes))]
    weight = [0] * len(lanes)
    for target in sorted(targets, key=_weight, reverse=True):  # the heaviest first
        lane = weight.index(min(weight))
        lanes[lane].append(target)
        weight[lane] += _weight(target)
    lanes = [sorted(lane, key=_weight) for lane in lanes]  # the light ones report first
    with ThreadPoolExecutor(len(lanes)) as pool:
        runs = [pool.submit(_lane, lane, args.limit, args.count) for lane in lanes if lane]
        results = {name: r for run in runs for name, r in run.result().items()}
    listed = equivalent()
    killed = total = 0
    for target in targets:
        found = results[target.name]
        if args.count:
            print(f"{target.name} ({target.module}): {len(found)} mutants")
            total += len(found)
            continue
        survivors = [k for o, k in found if o == "survived"]
        explained = [k for k in survivors if k in listed]
        n = len(found) - len(explained)
        k = n - (len(survivors) - len(explained))
        killed, total = killed + k, total + n
        print(f"{target.name} ({target.module}): killed {k}/{n}, equivalent {len(explained)}")
        for key in survivors:
            if key not in listed:
                print(f"  survived: {key}")
    print(f"mutants={total}" if args.count else f"mutants_killed={killed}/{total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
