"""The design is inside the repository: code, docs and tests cite docs/ pages by section name
(docs/design.md 'The layers'), never a rule number (nor a test named after one), a brief's
section, an issue number or a file outside the repository, and every section they cite exists."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SCANNED = ["airflow_samza_expand", "docs", "benchmarks", "dags", "scripts"]
SCANNED_FILES = ["pyproject.toml", "README.md", "CHANGELOG.md"]
SUFFIXES = {".py", ".md", ".toml", ".sh", ".yml", ".yaml", ".cfg", ".ini", ".txt", ".json", ".xml"}
SUFFIXES |= {".html", ".js", ".css"}
OUTSIDE = re.compile(r"[Rr]ules? 1\.[0-9]+|[Rr]ules?[ _][0-9]|DESIGN|[Ii]ssue [0-9]+|shared/DESIGN")
CITATION = re.compile(r"docs/([\w-]+\.md) '([^']+)'")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")


def files_under(top: str) -> list[Path]:
    return [
        p
        for p in sorted((REPO / top).rglob("*"))
        if p.is_file() and p.suffix in SUFFIXES and "__pycache__" not in p.parts
    ]


def scanned_files() -> list[Path]:
    return [REPO / name for name in SCANNED_FILES] + [
        p for top in SCANNED for p in files_under(top)
    ]


def scanned_tests() -> list[Path]:
    """tests/ without this file, whose examples below are deliberate."""
    return [p for p in files_under("tests") if p != Path(__file__).resolve()]


def lines_of(path: Path) -> list[tuple[str, int, str]]:
    where = str(path.relative_to(REPO))
    return [(where, n, line) for n, line in enumerate(path.read_text().splitlines(), 1)]


def outside_citations(lines: list[tuple[str, int, str]]) -> list[str]:
    return [f"{where}:{n}: {line.strip()}" for where, n, line in lines if OUTSIDE.search(line)]


def headings(page: Path) -> set[str]:
    found, fenced = set(), False
    for line in page.read_text().splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and (m := HEADING.match(line)):
            found.add(m.group(1))
    return found


def unresolved_citations(lines: list[tuple[str, int, str]]) -> list[str]:
    """A citation ``docs/<page>.md '<Section>'`` (on one line) whose page has no such heading."""
    bad = []
    for where, n, line in lines:
        for page, section in CITATION.findall(line):
            path = REPO / "docs" / page
            if not path.is_file() or section not in headings(path):
                bad.append(f"{where}:{n}: docs/{page} '{section}'")
    return bad


def test_nothing_cites_a_rule_number_an_issue_or_an_outside_design() -> None:
    lines = [entry for path in scanned_files() + scanned_tests() for entry in lines_of(path)]
    # a line compiling a pattern names what it looks for (tests/cli's help check), citing nothing
    found = outside_citations([entry for entry in lines if "re.compile(" not in entry[2]])
    assert found == [], "cite docs/design.md by section name instead:\n" + "\n".join(found)


def test_every_cited_docs_section_exists() -> None:
    lines = [entry for path in scanned_files() + scanned_tests() for entry in lines_of(path)]
    bad = unresolved_citations(lines)
    assert bad == [], "no such heading in the cited page:\n" + "\n".join(bad)


def test_the_checks_catch_what_they_are_for(tmp_path: Path) -> None:
    """Each pattern is caught, and a citation resolves only against a real heading."""
    for text in (
        "# rule 1.5: stale placements",
        "see DESIGN section 2",
        "(issue 41 item 8)",
        "Issue 14: processors",
        "`../shared/DESIGN.md` is the contract",
        "rules 1.8-1.10",
        "def test_rule_1_3_holds():",
    ):
        assert outside_citations([("x.py", 1, text)]), text
    assert outside_citations([("x.py", 1, "docs/design.md 'Stale placements'")]) == []
    good = "see docs/design.md 'The ordering barrier'"
    assert unresolved_citations([("x.py", 1, good)]) == []
    for bad in ("see docs/design.md 'The barrier rule'", "docs/no-such-page.md 'Growth'"):
        assert unresolved_citations([("x.py", 1, bad)]) == [f"x.py:1: {bad.split('see ')[-1]}"]
