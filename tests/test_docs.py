"""The documentation holds together: the README is a short front door whose two commands come
first, every relative link in the README, ARCHITECTURE.md and docs/ leads to a file (and a
heading, for ``#anchor`` links) that exists, every page of docs/ is reachable from its index,
and every results page says when, on which commit, with which command and on which machine it
was measured."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
README_MAX_LINES = 250


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def links(page: Path) -> list[str]:
    return LINK.findall(FENCE.sub("", page.read_text()))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.name}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_readme_is_a_front_door_that_starts_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    first_block = re.search(r"```bash\n(.*?)```", text, re.S).group(1).strip().splitlines()
    assert text.index("```bash") < text.index("\n## ")  # before any section
    assert len(first_block) == 2
    assert first_block[0].endswith("pip install -e . -c requirements/lock.txt && farm run")
    assert first_block[1].endswith(
        'pip install -e ".[test]" -c requirements/lock.txt && python -m pytest'
    )
    lock = (ROOT / "requirements" / "lock.txt").read_text()
    assert not re.search(r"^optfarm\b", lock, re.M)  # pip refuses to constrain what it installs
    assert len(re.findall(r"^[\w.-]+==", lock, re.M)) > 100


def test_every_docs_page_is_reachable_from_the_index():
    seen, todo = set(), [ROOT / "docs" / "README.md"]
    while todo:
        page = todo.pop()
        if page in seen or page.suffix != ".md" or not page.exists():
            continue
        seen.add(page)
        todo += [
            (page.parent / t.partition("#")[0]).resolve()
            for t in links(page)
            if not re.match(r"[a-z]+:", t) and t.partition("#")[0]
        ]
    orphans = [
        str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md") if p.resolve() not in seen
    ]
    assert not orphans, f"not linked from docs/README.md: {orphans}"


@pytest.mark.parametrize(
    "page", sorted((ROOT / "docs" / "results").glob("*.md")), ids=lambda p: p.name
)
def test_every_results_page_says_when_where_and_how_it_was_measured(page):
    if page.name == "README.md":
        return
    text = page.read_text()
    missing = [
        key
        for key in ("date", "commit", "command", "machine")
        if not re.search(rf"^\| {key}s? \|", text, re.M)
    ]
    assert not missing, f"{page.name} lacks a provenance row for {missing}"
