"""The code cites the repository's own documents, and what it cites exists.

A comment or docstring that names `docs/<name>.md` must name a document of docs/; a
section it quotes (`docs/store.md, "Demo data"`) must be a heading or a bold lead-in
of that document; a rule it names (`docs/architecture.md, rule S6`, `rules C1-C5`)
must be a numbered rule there (`**S6.`). Nothing cites documents that are not in the
repository.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CODE = ("memoryadmin", "sessions_app", "store_app", "graphs_app", "bench", "tests")
# The client library agents import is documented with the client.
CLIENT = ROOT / "memoryadmin" / "integrations"

DOC_RE = re.compile(r"docs/([a-z_]+)\.md")
SECTION_RE = re.compile(r'docs/([a-z_]+)\.md(?:,\s*|\s+\(|\s+)"([^"\n]+)"')
RULE_RE = re.compile(r"docs/([a-z_]+)\.md,\s*(?:rules?\s+)?([A-Z]{1,2})(\d+)(?:\s*[-–]\s*([A-Z]{1,2})(\d+))?\b")
LABEL_RE = re.compile(r"(?:\*\*|^\|\s*)([A-Z]{1,2}\d+)\.", re.MULTILINE)  # **S6. … or a table row | T1. …
# Written so that this line does not match itself.
OUTSIDE = re.compile("|".join([r"DESIGN" + " §", r"design[ ]section", r"\bseeds? \d{3}\b", r"\bseed[']s\b", r"\bseed[ ]table\b"]), re.IGNORECASE)


def sources() -> list[Path]:
    found = [ROOT / "gunicorn.conf.py"]
    for top in CODE:
        found += [p for p in sorted((ROOT / top).rglob("*.py")) if CLIENT not in p.parents and "migrations" not in p.parts]
    return found


@cache
def doc(name: str) -> str:
    return (ROOT / "docs" / f"{name}.md").read_text()


@cache
def sections(name: str) -> set[str]:
    text = doc(name)
    found = {line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")}
    for bold in re.findall(r"\*\*([^*\n]+)\*\*", text):
        bold = bold.strip().rstrip(".:")
        found.add(bold)
        found.add(re.sub(r"^[A-Z]{1,2}\d+\.\s*", "", bold))  # "C2. put" is also "put"
    return found


def test_every_cited_document_section_and_rule_exists():
    problems = []
    for path in sources():
        text = path.read_text()
        where = path.relative_to(ROOT)
        for name in set(DOC_RE.findall(text)):
            if not (ROOT / "docs" / f"{name}.md").is_file():
                problems.append(f"{where}: docs/{name}.md does not exist")
        for name, section in SECTION_RE.findall(text):
            if (ROOT / "docs" / f"{name}.md").is_file() and section not in sections(name):
                problems.append(f'{where}: docs/{name}.md has no section "{section}"')
        for name, prefix, first, end_prefix, last in RULE_RE.findall(text):
            if not (ROOT / "docs" / f"{name}.md").is_file():
                continue
            labels = set(LABEL_RE.findall(doc(name)))
            if end_prefix and end_prefix != prefix:
                problems.append(f"{where}: docs/{name}.md, {prefix}{first}-{end_prefix}{last} mixes two rule sets")
                continue
            for number in range(int(first), int(last or first) + 1):
                if f"{prefix}{number}" not in labels:
                    problems.append(f"{where}: docs/{name}.md has no rule {prefix}{number}")
    assert not problems, "\n".join(problems)


def test_nothing_cites_documents_outside_the_repository():
    texts = [*sources(), ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    problems = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in texts
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not problems, "\n".join(problems)


def test_the_architecture_document_opens_with_the_map():
    text = doc("architecture")
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings[0] == "## The map"
    for part in ("### The domains", "### The floors", "### Where a rule lives", "### How a request travels"):
        assert part in text.split("## Access rules")[0], part
    # Every package the floors name exists.
    for package in re.findall(r"^\w[\w ]*?\s{2,}((?:memoryadmin|sessions_app|store_app|graphs_app)/[\w/.]*[\w/])", text, re.MULTILINE):
        assert (ROOT / package).exists(), package
