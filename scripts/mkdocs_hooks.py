"""MkDocs hooks (mkdocs.yml): the site shows the repository's Markdown as GitHub does.

* Headings get GitHub's anchors (lower case, punctuation dropped, each space a hyphen), so a
  link that works on GitHub works on the site and the strict build checks the same anchors.
* The Markdown files outside docs/ that the pages link to (README.md, CHANGELOG.md, the
  docker stack's and the shipped job's READMEs) become pages under ``repo/``, and every
  relative link is resolved from the file's place in the repository, so ``../README.md`` in
  docs/index.md and ``docs/quickstart.md`` in README.md both land on the right page. A link to
  anything else outside docs/ stays as written, and the strict build reports it.
* A code fence left open (the rest of the page would render as code) is a warning.
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parents[1]
PREFIX = "repo/"  # where the Markdown outside docs/ goes in the site
OUTSIDE = ["README.md", "CHANGELOG.md", "docker/README.md", "airflow_samza_expand/spark/README.md"]
LINK = re.compile(r"(\]\()([^)\s#]*)(#[^)\s]*)?(\))")
FENCE = re.compile(r"^\s*(```|~~~)")
LOG = logging.getLogger("mkdocs.hooks.samza_expand")  # a warning fails --strict


def github_slug(value: str, separator: str = "-") -> str:
    """GitHub's heading anchor: lower case, only word characters, hyphens and spaces kept,
    each space a hyphen (no collapsing: "a - b" is "a---b")."""
    kept = re.sub(r"[^\w\- ]", "", value.strip().lower())
    return kept.replace(" ", separator)


def on_config(config: Any) -> Any:
    config.mdx_configs.setdefault("toc", {})["slugify"] = github_slug
    return config


def on_files(files: Files, config: Any) -> Files:
    for path in OUTSIDE:
        files.append(File.generated(config, PREFIX + path, abs_src_path=str(REPO / path)))
    return files


def repo_path(src_uri: str) -> str:
    """Where a site page's file lives in the repository."""
    return src_uri[len(PREFIX) :] if src_uri.startswith(PREFIX) else "docs/" + src_uri


def site_path(path: str) -> str | None:
    """The site's file for a repository path (None: not part of the site)."""
    if path.startswith("docs/"):
        return path[len("docs/") :]
    return PREFIX + path if path in OUTSIDE else None


def rewrite(line: str, here: str) -> str:
    """Relative links of one line of the file at repository path `here`, made site-relative."""

    def one(match: re.Match[str]) -> str:
        target = match.group(2)
        if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
            return match.group(0)
        in_repo = posixpath.normpath(posixpath.join(posixpath.dirname(here), target))
        site = site_path(in_repo)
        if site is None:
            return match.group(0)
        page_dir = posixpath.dirname(site_path(here) or "")
        new = posixpath.relpath(site, page_dir or ".")
        return f"{match.group(1)}{new}{match.group(3) or ''}{match.group(4)}"

    return LINK.sub(one, line)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    here = repo_path(page.file.src_uri)
    out, fence = [], None
    for line in markdown.split("\n"):
        opened = FENCE.match(line)
        if opened and fence is None:
            fence = opened.group(1)
        elif opened and line.strip().startswith(fence or "\0"):
            fence = None
        elif fence is None:
            line = rewrite(line, here)
        out.append(line)
    if fence is not None:
        LOG.warning("Doc file '%s' has a code fence that is never closed", here)
    return "\n".join(out)
