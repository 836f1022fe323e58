"""Build hook of samza-expand-runtime: the job side's modules, from the provider's source tree
next to this directory (a checkout) or from this directory itself (an unpacked sdist)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

# the job side: everything but the Airflow surface, the example DAGs, the demo and test tools
PARTS = ["__init__.py", "py.typed", "core", "_kafka", "store", "_protocol", "spark", "examples"]
PACKAGE = "airflow_samza_expand"


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root)
        source = root / PACKAGE if (root / PACKAGE).is_dir() else root.parent / PACKAGE
        for part in PARTS:
            build_data["force_include"][str(source / part)] = f"{PACKAGE}/{part}"
