"""Every relative link in README.md and docs/*.md reaches something: the file exists and,
where the link names an anchor of a Markdown file, that file has a heading with that anchor
(GitHub's rule: lower case, punctuation dropped, spaces to hyphens, -1, -2... on repeats).
A newcomer follows these links first; a renamed file or heading must take them along."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def prose(path: Path) -> list[tuple[int, str]]:
    """The lines of ``path`` outside fenced code blocks, numbered from 1."""
    lines: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose(path):
        heading = HEADING.match(line)
        if heading is None:
            continue
        text = re.sub(r"`([^`]*)`", r"\1", heading.group(1))
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
        slug = re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")
        repeat = seen.get(slug, 0)
        seen[slug] = repeat + 1
        found.add(slug if repeat == 0 else f"{slug}-{repeat}")
    return found


def test_the_anchor_rule_is_githubs() -> None:
    readme = anchors(ROOT / "README.md")
    assert {"running-agents-worker-monitor-supervise", "exit-codes", "stores"} <= readme


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_relative_link_reaches_a_file_and_a_heading(page: Path) -> None:
    broken = []
    for number, line in prose(page):
        for target in LINK.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: not ours
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.name}:{number}: no file {target}")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.name}:{number}: no heading for #{anchor} in {dest.name}")
    assert broken == []
