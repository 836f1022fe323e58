"""Every benchmark runs in CI at a smoke size and prints its figure line (docs/testing.md).

The benchmarks are discovered (benchmarks/*.py), so a new one is covered without an edit here
and must take ``--smoke`` (tiny sizes, one round, the same code and the same last line):

* ``test_benchmark_smoke``: ``python benchmarks/<b>.py --smoke`` exits 0 and its last line is
  ``key=value`` pairs naming every figure its docstring promises (``key=<...>``);
* ``test_benchmark_imports_resolve``: every ``airflow_samza_expand`` import in the file, those
  inside functions included, names a module and attribute that exist (a module removed under a
  benchmark fails here, not on the night someone runs it) - checked in a process of its own
  (the imports take Airflow in, which this process must not import before its home is set);
* the benchmarks in ``HEAVY`` (their smoke run starts Spark processes one after another and
  takes minutes on the 2-core CI machine) run ``--help`` in CI instead of the smoke run, plus
  the import check; ``SAMZA_EXPAND_BENCH_SMOKE=all`` runs their smoke too (under the heavy
  lock). ``HELPERS`` are scripts another benchmark runs (no figure line of their own).
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH_DIR = ROOT / "benchmarks"
# scripts run by a benchmark, not benchmarks themselves (import check only)
HELPERS = {
    "jvm_kafka_source_count.py": "job_throughput.py's yardstick, run by spark-submit with "
    "positional arguments",
}
# smoke runs measured under the heavy lock (2 cores, the suite's machine); too long for CI
HEAVY = {
    "celery_workers.py": "Airflow's services, two Celery workers and a Spark job: minutes",
    "handover.py": "5 Spark processors in turn (in place, handover, cold, failover): 120 s",
    "fault_matrix.py": "Apache Kafka, a Spark job, a DAG run killed and cleared: minutes",
    "job_throughput.py": "3 spark-submits (job, JVM source, runtime) and the connector jars",
    "multi_job.py": "Airflow and 3 Spark jobs launched and restarted: minutes",
    "read_scaling.py": "2 runs of the shipped job (local[2]) and a broker: 60-75 s",
}
SMOKE_ALL = os.environ.get("SAMZA_EXPAND_BENCH_SMOKE") == "all"
SMOKE_TIMEOUT_S = 900 if SMOKE_ALL else 300
# a figure key promised in a docstring: ``name=<x>`` or ``find_readers_s[<n>]=<x>``
PROMISED = re.compile(r"\b([A-Za-z_]\w*)(\[<\w+>\])?=<")
FIGURE = re.compile(r"[A-Za-z_]\w*(\[[^\]=\s]+\])?=\S+")


def benchmarks() -> list[str]:
    return sorted(p.name for p in BENCH_DIR.glob("*.py") if not p.name.startswith("_"))


def smoke_params() -> list[str]:
    return [b for b in benchmarks() if b not in HELPERS and (SMOKE_ALL or b not in HEAVY)]


def run_benchmark(name: str, *args: str, timeout_s: float) -> subprocess.CompletedProcess:
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    return subprocess.run(
        [sys.executable, str(BENCH_DIR / name), *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s,
    )  # fmt: skip


def promised_keys(source: str) -> set[str]:
    """The figure keys of the module docstring's ``key=<...>`` (``name[`` for indexed ones)."""
    doc = ast.get_docstring(ast.parse(source)) or ""
    return {key + ("[" if index else "") for key, index in PROMISED.findall(doc)}


def figure_keys(line: str) -> set[str] | None:
    """The keys of a figure line (``name`` or ``name[`` for ``name[n]=``), None if any token
    of the line is not ``key=value``."""
    tokens = line.split()
    if not tokens or not all(FIGURE.fullmatch(t) for t in tokens):
        return None
    return {t.split("=", 1)[0].split("[", 1)[0] + ("[" if "[" in t.split("=")[0] else "")
            for t in tokens}  # fmt: skip


def unresolved_imports(source: str) -> list[str]:
    """Every ``airflow_samza_expand`` import of ``source`` (any depth) that does not resolve."""
    missing = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            wanted = [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            wanted = [(node.module, a.name) for a in node.names]
        else:
            continue
        for module, name in wanted:
            if module.split(".")[0] != "airflow_samza_expand":
                continue
            try:
                found = importlib.import_module(module)
            except ImportError as exc:
                missing.append(f"line {node.lineno}: {module} ({exc})")
                continue
            if name is None or name == "*" or hasattr(found, name):
                continue
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"line {node.lineno}: {module} has no {name}")
    return missing


def test_benchmarks_are_discovered_and_the_lists_name_real_files() -> None:
    names = benchmarks()
    assert len(names) >= 5, names
    stale = sorted((set(HELPERS) | set(HEAVY)) - set(names))
    assert not stale, f"HELPERS/HEAVY name files benchmarks/ no longer has: {stale}"


@pytest.fixture(scope="module")
def import_problems(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """`unresolved_imports` of every benchmark, from one process of its own (this module run as
    a script) with a throwaway Airflow home."""
    home = str(tmp_path_factory.mktemp("airflow-home"))
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, AIRFLOW_HOME=home, PYTHONPATH=path)
    done = subprocess.run(
        [sys.executable, __file__, "--check-imports"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", benchmarks())
def test_benchmark_imports_resolve(name: str, import_problems: dict[str, list[str]]) -> None:
    missing = import_problems[name]
    assert not missing, f"benchmarks/{name} imports what does not exist: {missing}"


def starts_spark(name: str) -> bool:
    source = (BENCH_DIR / name).read_text()
    return any(s in source for s in ("local[2]", "SparkSession", "spark_submit", "JobProcess"))


@pytest.mark.parametrize(
    "name",
    [pytest.param(b, marks=[pytest.mark.spark] if starts_spark(b) else []) for b in smoke_params()],
)
def test_benchmark_smoke(name: str) -> None:
    proc = run_benchmark(name, "--smoke", timeout_s=SMOKE_TIMEOUT_S)
    out = proc.stdout.strip().splitlines()
    context = f"stdout tail:\n{chr(10).join(out[-15:])}\nstderr tail:\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, f"benchmarks/{name} --smoke exited {proc.returncode}\n{context}"
    assert out, f"benchmarks/{name} --smoke printed nothing\n{context}"
    keys = figure_keys(out[-1])
    assert keys is not None, f"the last line is not key=value figures: {out[-1]!r}\n{context}"
    promised = promised_keys((BENCH_DIR / name).read_text())
    assert promised <= keys, f"figures the docstring promises are missing: {promised - keys}"


@pytest.mark.parametrize("name", sorted(set(HEAVY) - set(HELPERS)))
def test_heavy_benchmark_takes_smoke(name: str) -> None:
    """CI's share of a heavy benchmark: it starts, parses its options and has ``--smoke``."""
    proc = run_benchmark(name, "--help", timeout_s=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "--smoke" in proc.stdout, f"benchmarks/{name} has no --smoke option"


def test_figure_line_parsing() -> None:
    assert figure_keys("a_s=1.5 b[10]=0.2 c=1/2 master=local") == {"a_s", "b[", "c", "master"}
    assert figure_keys("produced 10 records") is None
    assert figure_keys("") is None
    assert promised_keys('"""x.\n\n    a_s=<x> find_s[<n>]=<y> fault=.. n=3\n"""') == {
        "a_s",
        "find_s[",
    }


if __name__ == "__main__":  # --check-imports: the import_problems fixture's process
    assert sys.argv[1:] == ["--check-imports"], sys.argv
    print(json.dumps({b: unresolved_imports((BENCH_DIR / b).read_text()) for b in benchmarks()}))
