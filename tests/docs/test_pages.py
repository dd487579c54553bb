"""The documentation pages: links resolve, tables render, each page says how to run it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .test_commands import PAGES, ROOT

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*```")
#: Pages that state how their commands run (the README's quick start says it itself).
ACTIVATE = "`. .venv/bin/activate`"
OWN_NOTE_EXEMPT = {"README.md", "docs/cel.md", "docs/decisions.md"}


def prose(page: str) -> list[tuple[int, str]]:
    """Lines outside fenced code blocks, with their numbers."""
    out, inside = [], False
    for no, line in enumerate((ROOT / page).read_text(encoding="utf-8").splitlines(), start=1):
        if FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            out.append((no, line))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    rel = str(path.relative_to(ROOT))
    return {slug(line.lstrip("#")) for _, line in prose(rel) if line.startswith("#")}


@pytest.mark.parametrize("page", PAGES)
def test_relative_links_resolve(page: str) -> None:
    broken = []
    for no, line in prose(page):
        for m in LINK.finditer(line):
            target = m.group(1) or m.group(2)
            if re.match(r"^[a-z]+:", target):
                continue  # http:, https:, mailto:
            path_part, _, anchor = target.partition("#")
            path = (ROOT / page).parent / path_part if path_part else ROOT / page
            if not path.exists():
                broken.append(f"{page}:{no}: {target}: no such file")
            elif anchor and path.suffix == ".md" and anchor not in anchors(path.resolve()):
                broken.append(f"{page}:{no}: {target}: no such heading")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("page", PAGES)
def test_tables_have_a_header(page: str) -> None:
    """A run of table rows must start with a header and a separator row, or it renders as text."""
    lines = prose(page)
    problems = []
    i = 0
    while i < len(lines):
        if not lines[i][1].lstrip().startswith("|"):
            i += 1
            continue
        j = i
        while j < len(lines) and lines[j][1].lstrip().startswith("|"):
            j += 1
        block = [text for _, text in lines[i:j]]
        if len(block) < 2 or not re.fullmatch(r"\s*\|(\s*:?-{3,}:?\s*\|)+\s*", block[1]):
            problems.append(f"{page}:{lines[i][0]}: table rows without a header separator")
        i = j
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", [p for p in PAGES if p not in OWN_NOTE_EXEMPT])
def test_page_says_how_commands_run(page: str) -> None:
    head = (ROOT / page).read_text(encoding="utf-8").split("\n## ", 1)[0]
    assert ACTIVATE in head, f"{page}: the top of the page must say how its commands are run"


def test_slug() -> None:
    assert slug(" Quick start (fresh machine, Python ≥ 3.11)") == "quick-start-fresh-machine-python--311"
    assert slug("`events`, `logs` and `warnings`") == "events-logs-and-warnings"
