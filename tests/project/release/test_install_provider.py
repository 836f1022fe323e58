"""The provider installs into a clean Airflow 3 environment with one command, the one
docs/install.md gives (Airflow pinned next to the package, the constraints file), and Airflow
lists it: a new virtualenv, the release's wheel, `airflow providers list`, its `[samza_expand]`
section, its requirements consistent (`uv pip check`). Packages come from uv's cache, so the
install takes seconds once the cache holds them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from release_helpers import CONSTRAINTS, Dists, uv

from airflow_samza_expand import __version__
from airflow_samza_expand.get_provider_info import CONFIG_OPTIONS, SECTION

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def pinned(name: str) -> str:
    for line in CONSTRAINTS.read_text().splitlines():
        if line.lower().startswith(f"{name}=="):
            return line.split("==", 1)[1].strip()
    raise AssertionError(f"{name} is not pinned in {CONSTRAINTS.name}")


def test_provider_installs_into_a_clean_airflow_3_and_is_listed(
    dists: Dists, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    uv("venv", "--quiet", "--python", sys.executable, str(venv))
    python = venv / "bin" / "python"
    airflow = f"apache-airflow=={pinned('apache-airflow')}"
    # the one command (docs/install.md, "The provider, into Airflow 3")
    uv("pip", "install", "--quiet", "--python", str(python), airflow, str(dists.wheel),
       "--constraint", str(CONSTRAINTS))  # fmt: skip
    checked = uv("pip", "check", "--python", str(python))
    assert "All installed packages are compatible" in checked.stdout + checked.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYTHONPATH"))}
    env |= {"AIRFLOW_HOME": str(tmp_path / "home"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}

    def run(*argv: str) -> str:
        result = subprocess.run(
            [str(venv / "bin" / argv[0]), *argv[1:]],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
        return result.stdout

    listed = [line for line in run("airflow", "providers", "list").splitlines()
              if line.startswith("airflow-samza-expand ")]  # fmt: skip
    assert len(listed) == 1 and listed[0].rstrip().endswith(f"| {__version__}"), listed
    section = run("airflow", "config", "list", "--section", SECTION)
    assert all(f"{option} =" in section for option in CONFIG_OPTIONS), section
    assert run("samza-expand", "--version").strip() == f"samza-expand {__version__}"
    # the installed package, not this checkout
    where = run("python", "-c", "import airflow_samza_expand as a; print(a.__file__)")
    assert where.strip().startswith(str(venv)), where
