"""The documentation's code, run as a reader would: the quickstart's "Your first job" walk-through
up to (excluding) Spark - its Kafka block runs in bash against a fresh development broker, then
the topics and job model v1 it promises are there and a rerun of its init-job line changes
nothing - and every code block of the README and the user docs that can run offline: each
``samza-expand`` command parses with the real parser (``--help``, ``--version`` and ``plan`` of
an existing file run), each Python block parses, and each one that builds a DAG builds it."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand._testing import DevBrokerProcess
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
QUICKSTART = REPO / "docs" / "quickstart.md"
MARKER = "<!-- first-job: kafka commands"
# The pages a user reads (internal-api.md holds signatures, not code to run).
USER_DOCS = [README, *(REPO / "docs" / f"{name}.md" for name in (
    "index", "quickstart", "own-job", "deployments", "operations", "reference", "internals",
    "job-model", "ui", "testing"))]  # fmt: skip


def section() -> str:
    text = QUICKSTART.read_text(encoding="utf-8")
    start = text.index("## Your first job")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def kafka_block() -> str:
    """The fenced bash block right after the marker comment."""
    after = section().split(MARKER, 1)[1]
    match = re.search(r"```bash\n(.*?)```", after, re.S)
    assert match, f"no ```bash block after {MARKER!r} in docs/quickstart.md"
    return match.group(1)


def run_block(block: str, bootstrap: str) -> subprocess.CompletedProcess[str]:
    bin_dir = os.path.dirname(sys.executable)  # samza-expand and python of this environment
    env = {**os.environ, "KAFKA": bootstrap, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_the_walk_through_kafka_commands_as_written(tmp_path):
    block = kafka_block()
    assert "samza-expand init-job" in block and "spark-submit" not in block
    with DevBrokerProcess(data_dir=str(tmp_path / "broker")) as broker:
        result = run_block(block, broker.bootstrap)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "wrote job model v1 of orders-counter" in result.stdout
        config = client_config(broker.bootstrap)
        with KafkaAdmin(config, timeout_s=15) as admin:
            assert admin.partition_counts(["orders", "orders-counts"]) == {
                "orders": 2,
                "orders-counts": 1,
            }
        with KafkaCoordinatorStore(config, "orders-counter") as store:
            (model,) = store.job_model_history()
        assert model.partition_counts() == {"orders": 2}
        assert {
            t: sorted(s.partition for s in ssps) for t, ssps in model.task_to_ssps().items()
        } == {
            "Partition 0": [0],
            "Partition 1": [1],
        }
        # the block's init-job step again: a no-op success
        init = block[block.index("samza-expand init-job") :]
        again = run_block(init, broker.bootstrap)
        assert again.returncode == 0, again.stderr
        assert "nothing written" in again.stdout


def test_the_walk_through_dag_file_is_python():
    blocks = re.findall(r"```python\n(.*?)```", section(), re.S)
    assert any("build_expansion_dag(" in b for b in blocks)
    for block in blocks:
        ast.parse(block)


def test_the_operations_guide_init_job_command_parses():
    """docs/operations.md writes v1 with init-job (no snippet that skips the topic check)."""
    import shlex

    from airflow_samza_expand.cli import build_parser

    text = (README.parent / "docs" / "operations.md").read_text(encoding="utf-8")
    match = re.search(r"samza-expand (init-job .*?)\n\s*```", text, re.S)
    assert match, "docs/operations.md has no samza-expand init-job command"
    argv = shlex.split(match.group(1).replace("\\\n", " "))
    args = build_parser(only="init-job").parse_args(argv)
    assert (args.job_name, args.topic, args.create_output_topic) == (
        "orders-counter",
        ["orders"],
        "orders-counts",
    )
    assert "JobModel.initial(" not in text


# -- every offline code block of the user docs ---------------------------------------------------


def blocks(lang: str) -> list[tuple[str, str]]:
    """(page, block) for every fenced block in `lang` of the user docs."""
    found = []
    for page in USER_DOCS:
        text = page.read_text(encoding="utf-8")
        found += [(page.name, b) for b in re.findall(rf"```{lang}\n(.*?)```", text, re.S)]
    return found


def cli_lines() -> list[tuple[str, str]]:
    """(page, command line) of every ``samza-expand`` command in a bash block (continuations
    joined, comments and a leading ``.venv/bin/`` or ``... &&`` dropped)."""
    out = []
    for page, block in blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip()
            found = re.search(r"(?<![\w-])samza-expand ", line)  # not airflow-samza-expand
            if found and not line.startswith("#"):
                out.append((page, line[found.start() :]))
    return out


def test_the_docs_have_code_blocks_to_run():
    assert len(cli_lines()) >= 8 and len(blocks("python")) >= 5


@pytest.mark.parametrize(("page", "command"), cli_lines())
def test_every_cli_example_parses_and_the_offline_ones_run(page, command, tmp_path, capsys):
    import shlex

    from airflow_samza_expand.cli import build_parser, main

    argv = shlex.split(command.replace("$KAFKA", "localhost:9092"))[1:]
    offline = "--help" in argv or "--version" in argv or (
        argv[:1] == ["plan"] and all((REPO / a).exists() for a in argv if a.endswith(".json"))
    )
    if offline:
        old = os.getcwd()
        os.chdir(REPO)
        try:
            code = main(argv)
        except SystemExit as exit_:  # --help / --version
            code = exit_.code
        finally:
            os.chdir(old)
        out, err = capsys.readouterr()
        assert code == 0, f"{page}: samza-expand {' '.join(argv)}: {err}"
        assert out.strip(), f"{page}: samza-expand {' '.join(argv)} printed nothing"
        return
    words = [a for a in argv if not a.startswith("-")]
    only = words[0] if words else None
    args = build_parser(only=only, dev_only=words[1] if only == "dev" else None).parse_args(argv)
    assert callable(args.func), f"{page}: {command}"
    assert "note:" not in capsys.readouterr().err, f"{page}: {command} uses an old spelling"


@pytest.mark.parametrize(("page", "block"), blocks("python"))
def test_every_python_block_parses(page, block):
    ast.parse(block)


DAG_BLOCKS = [(p, b) for p, b in blocks("python") if "build_expansion_dag(" in b and "..." not in b]


@pytest.mark.parametrize(("page", "block"), DAG_BLOCKS)
def test_every_dag_example_builds_its_dag(page, block, tmp_path):
    """A block that builds a DAG builds it (in a process with a throwaway Airflow home): its
    names are importable, its arguments accepted, and the DAG has the chain's tasks."""
    probe = block + "\nprint(sorted(dag.task_ids), sorted(dag.params.keys()))\n"
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, f"{page}:\n{block}\n{done.stderr[-3000:]}"
    assert "plan" in done.stdout and "report" in done.stdout, done.stdout
    # the settings in groups: no flat keyword of a group (deprecated) in the docs
    assert "is deprecated: pass" not in done.stderr, f"{page}:\n{done.stderr[-3000:]}"


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


# ui.md and testing.md are written with the UI and the suite (their own tests hold them)
LINKED_PAGES = [p for p in USER_DOCS if p.name not in ("ui.md", "testing.md")]


@pytest.mark.parametrize("page", LINKED_PAGES, ids=lambda p: p.name)
def test_every_link_between_the_pages_resolves(page):
    """A reader following the README to their own job never meets a dead link or anchor."""
    text = page.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        doc = (page.parent / path).resolve() if path else page
        assert doc.exists(), f"{page.name}: link to {target} - no such file"
        if anchor and doc.suffix == ".md":
            headings = re.findall(r"^#+ (.*)$", doc.read_text(encoding="utf-8"), re.M)
            assert anchor in {_anchor(h) for h in headings}, f"{page.name}: no #{anchor} in {path}"
