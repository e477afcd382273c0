"""The README is a guide that leads to the reference under docs/: every page there is linked from the README, every
relative link of the README and of the pages names a file that exists (an anchor, a heading of that page), and the
README stays a guide an operator reads in minutes, not a manual."""

from __future__ import annotations

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _pages() -> list[str]:
    found = []
    for folder, _, files in os.walk(DOCS):
        found += [os.path.join(folder, name) for name in files if name.endswith(".md")]
    return sorted(found)


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _anchors(path: str) -> set[str]:
    """GitHub's anchors of a Markdown file's headings: lower case, punctuation dropped, spaces as hyphens."""
    anchors = set()
    for line in _read(path).splitlines():
        m = re.match(r"^#{1,6} (.*)", line)
        if m:
            text = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower())
            anchors.add(text.replace(" ", "-"))
    return anchors


def test_every_docs_page_is_linked_from_the_readme():
    readme = _read(os.path.join(ROOT, "README.md"))
    linked = {os.path.normpath(os.path.join(ROOT, target.split("#", 1)[0])) for target in LINK.findall(readme)}
    orphans = [os.path.relpath(page, ROOT) for page in _pages() if page not in linked]
    assert not orphans, f"docs pages the README does not lead to: {orphans}"


@pytest.mark.parametrize("page", [os.path.join(ROOT, "README.md")] + _pages(), ids=lambda p: os.path.relpath(p, ROOT))
def test_relative_links_name_files_and_headings_that_exist(page):
    broken = []
    for target in LINK.findall(_read(page)):
        if re.match(r"^[a-z]+:", target):
            continue  # http(s), mailto: not checked here (no network in the tests)
        path, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        if not os.path.exists(resolved):
            broken.append(target)
        elif anchor and resolved.endswith(".md") and anchor not in _anchors(resolved):
            broken.append(target)
    assert not broken, f"{os.path.relpath(page, ROOT)}: links to nothing: {broken}"


def test_the_readme_is_a_guide_not_a_manual():
    lines = _read(os.path.join(ROOT, "README.md")).splitlines()
    assert len(lines) <= 400, f"README.md has {len(lines)} lines: move reference material to docs/"
    headings = [line for line in lines if line.startswith("## ")]
    for wanted in ("## Install", "## Put it in front of your cluster", "## Observe it", "## Read more"):
        assert wanted in headings, f"the README guide lacks its section {wanted!r}"
