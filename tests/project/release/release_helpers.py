"""Building this checkout's distributions with `uv build` (tests/project/release)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
UV = Path(sys.executable).with_name("uv")
CONSTRAINTS = REPO / "constraints.txt"


@dataclass(frozen=True)
class Dists:
    sdist: Path  # airflow-samza-expand, the provider
    wheel: Path
    runtime_sdist: Path  # samza-expand-runtime, the job side without Airflow
    runtime_wheel: Path


def uv(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``uv ARGS`` in the checkout; a failure shows uv's own output."""
    result = subprocess.run(
        [str(UV), *args], capture_output=True, text=True, cwd=REPO, timeout=timeout
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def only(out: Path, pattern: str) -> Path:
    found = sorted(out.glob(pattern))
    assert len(found) == 1, f"expected one {pattern} in {out}: {found}"
    return found[0]


def build_dists(out: Path) -> Dists:
    uv("build", "--quiet", "--out-dir", str(out), ".")  # sdist, then the wheel from that sdist
    uv("build", "--quiet", "--out-dir", str(out), "runtime")  # the same for the job side
    return Dists(
        sdist=only(out, "airflow_samza_expand-*.tar.gz"),
        wheel=only(out, "airflow_samza_expand-*.whl"),
        runtime_sdist=only(out, "samza_expand_runtime-*.tar.gz"),
        runtime_wheel=only(out, "samza_expand_runtime-*.whl"),
    )
