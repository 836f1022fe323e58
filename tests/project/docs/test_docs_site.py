"""The documentation site (mkdocs.yml) builds with ``mkdocs build --strict``, and the strict
build fails on what it is there to catch: a code fence left open, a dead link, a dead anchor,
a page left out of the navigation. No user page names an internal (underscore) module."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
MKDOCS = Path(sys.executable).with_name("mkdocs")
# contributor pages: they name internal modules on purpose
CONTRIBUTOR_PAGES = {"docs/testing.md", "docs/internal-api.md"}


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MKDOCS), "build", "--strict", "-f", str(config), "-d", str(site)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    result = build(REPO / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stderr[-4000:]
    internals = (tmp_path / "site" / "internals" / "index.html").read_text()
    for anchor in ("restart-strategies", "processors-liveness-and-the-active-lease"):
        assert f'id="{anchor}"' in internals, anchor
    # the README is a page, and its links to docs/ point at the site's pages
    readme = (tmp_path / "site" / "repo" / "index.html").read_text()  # README.md: an index
    assert 'href="../install/"' in readme


def test_the_strict_build_fails_on_a_broken_page(tmp_path: Path) -> None:
    """The same configuration on a copy of docs/ with four defects: each one is reported."""
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    config["hooks"] = [str(REPO / h) for h in config["hooks"]]
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    page = tmp_path / "docs" / "job-model.md"
    page.write_text(
        page.read_text()
        + "\n[gone](no-such-page.md) [bad anchor](internals.md#no-such-heading)\n\n```\nopen\n"
    )
    (tmp_path / "docs" / "orphan.md").write_text("# Not in the navigation\n")
    result = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0
    for expected in (
        "no-such-page.md",
        "#no-such-heading",
        "code fence that is never closed",
        "orphan.md",
    ):
        assert expected in result.stderr, (expected, result.stderr[-4000:])


def underscore_modules() -> list[str]:
    package = REPO / "airflow_samza_expand"
    return sorted(
        {
            p.stem if p.is_file() else p.name
            for p in package.rglob("_*")
            if not p.name.startswith("__") and (p.suffix == ".py" or p.is_dir())
        }
    )


def test_no_user_page_names_an_internal_module() -> None:
    """A user page names public modules only (docs/internal-api.md, "Public names")."""
    names = "|".join(map(re.escape, underscore_modules()))
    dotted = re.compile(rf"(?<![\w-])(?:\w+[./])*(?:{names})\b(?:[./]\w+)*")
    pages = ["README.md", "CHANGELOG.md", "docker/README.md"]
    pages += [str(p.relative_to(REPO)) for p in sorted((REPO / "docs").glob("*.md"))]
    found = []
    for page in pages:
        if page in CONTRIBUTOR_PAGES:
            continue
        for number, line in enumerate((REPO / page).read_text().splitlines(), 1):
            found += [
                f"{page}:{number}: {m.group(0)}"
                for m in dotted.finditer(line)
                if "." in m.group(0) or "/" in m.group(0)
            ]
    assert found == [], "\n".join(found)


def test_the_configuration_page_lists_every_option_with_its_default() -> None:
    from airflow_samza_expand.get_provider_info import CONFIG_OPTIONS, SECTION

    page = (REPO / "docs" / "configuration.md").read_text()
    assert f"## `[{SECTION}]`" in page
    for option, (_, kind, default, _) in CONFIG_OPTIONS.items():
        row = next((r for r in page.splitlines() if r.startswith(f"| `{option}` |")), None)
        assert row is not None, f"docs/configuration.md has no row for {option}"
        cells = [c.strip() for c in row.split("|")[1:-1]]
        shown = {None: "(none)", "": "(empty)"}.get(default, f"`{default}`")
        assert cells[1:3] == [kind, shown], (option, cells)
