"""The public surface is what docs/internal-api.md lists under "Public names"; every other module
is internal by its name (a path component starting with `_`). No Kafka, no Spark: the walk reads
the package's files; only the public modules are imported."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import airflow_samza_expand

REPO = Path(__file__).resolve().parents[2]
PACKAGE = Path(airflow_samza_expand.__file__).resolve().parent
INTERNAL_API = REPO / "docs" / "internal-api.md"
README = REPO / "README.md"


def public_names() -> dict[str, list[str]]:
    """module -> exported names, from the marked list of docs/internal-api.md ("-": none)."""
    text = INTERNAL_API.read_text(encoding="utf-8")
    match = re.search(
        r"<!-- public-names: start -->\s*```\n(.*?)```\s*<!-- public-names: end -->", text, re.S
    )
    assert match, "docs/internal-api.md lost its marked list of public names"
    found: dict[str, list[str]] = {}
    for line in match.group(1).splitlines():
        if not line.strip():
            continue
        module, _, names = line.partition(":")
        assert module.strip() not in found, f"{module} listed twice"
        found[module.strip()] = [n for n in names.split() if n != "-"]
    return found


PUBLIC = public_names()


def package_modules() -> list[str]:
    """Every module of the package, by its files (nothing imported)."""
    modules = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if "__pycache__" in parts or parts[-1] == "__main__":
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules.append(".".join([airflow_samza_expand.__name__, *parts]))
    return modules


def test_every_module_is_public_or_internal_by_its_name():
    modules = package_modules()
    assert "airflow_samza_expand.airflow.operators" in modules and len(modules) > 100
    neither = [
        m for m in modules if m not in PUBLIC and not any(p.startswith("_") for p in m.split("."))
    ]
    assert neither == [], (
        "modules neither listed under 'Public names' in docs/internal-api.md nor named with a "
        f"leading underscore: {neither}"
    )


def test_every_listed_public_module_exists_and_is_not_underscored():
    modules = set(package_modules())
    for module in PUBLIC:
        assert module in modules, f"docs/internal-api.md lists {module}, which does not exist"
        assert not any(p.startswith("_") for p in module.split(".")), module


@pytest.mark.parametrize("module", [m for m, names in PUBLIC.items() if names])
def test_a_public_modules_exports_are_the_listed_names_and_import(module):
    imported = importlib.import_module(module)
    listed = PUBLIC[module]
    exported = getattr(imported, "__all__", None)
    if exported is not None:
        assert sorted(exported) == sorted(listed), f"{module}.__all__ differs from the docs"
    for name in listed:
        assert getattr(imported, name, None) is not None, f"{module}.{name} does not import"


def test_the_readme_reference_names_every_public_module():
    text = README.read_text(encoding="utf-8")
    match = re.search(r"^## Reference\n(.*?)^## ", text, re.S | re.M)
    assert match, "README.md has no '## Reference' section"
    missing = [m for m in PUBLIC if m not in match.group(1)]
    assert missing == [], f"README.md's Reference does not name {missing}"
