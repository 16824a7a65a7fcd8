"""Every place that cites the design names a section docs/ARCHITECTURE.md has: a comment's
``docs/ARCHITECTURE.md, "Section"`` (or ``("Section")``) and a Markdown link's
``ARCHITECTURE.md#section``. A renamed section must take its citations with it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "ARCHITECTURE.md"
QUOTED = re.compile(r'ARCHITECTURE\.md,?\s*\(?"([^"]+)"')
ANCHOR = re.compile(r"ARCHITECTURE\.md#([a-z0-9-]+)")


def sections() -> set[str]:
    return {
        line.lstrip("#").strip()
        for line in DESIGN.read_text("utf-8").splitlines()
        if line.startswith("## ")
    }


def anchor(title: str) -> str:
    return re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-")


def citing_files() -> list[Path]:
    found = [*ROOT.glob("src/shoal/**/*.py"), *ROOT.glob("src/shoal/**/*.sql")]
    found += [*ROOT.glob("tests/**/*.py"), *ROOT.glob("docs/*.md"), ROOT / "README.md"]
    return [p for p in found if p not in (DESIGN, Path(__file__).resolve())]


def test_every_citation_of_the_design_names_a_section_it_has() -> None:
    titles = sections()
    anchors = {anchor(t) for t in titles}
    cited = 0
    for path in citing_files():
        text = " ".join(path.read_text("utf-8").split())  # citations may wrap
        for title in QUOTED.findall(text):
            cited += 1
            assert title in titles, f"{path.relative_to(ROOT)} cites a missing section {title!r}"
        for name in ANCHOR.findall(text):
            cited += 1
            assert name in anchors, f"{path.relative_to(ROOT)} links a missing section #{name}"
    assert cited >= 10  # the scan found the citations it is meant to check
