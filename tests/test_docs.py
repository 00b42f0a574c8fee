"""The user documentation describes the product, and covers all of it.

Pure file checks (no Redis, no database), fast. They fail when:

- a page of docs/ or README.md cites one of our issues ("issue 19", "Issue #4", "#23")
  or a benchmark run by number ("run 6", "runs 1-6", "Run 4 (2026-11-21)"): the history
  of the developers' work belongs in CHANGELOG.md, not in pages a user reads;
- a top-level ``ZQUEUE`` key or a queue option that ``django_zqueue/conf.py`` accepts
  (``conf.TOP_LEVEL_KEYS``, ``conf.QUEUE_KEYS``, read from the code, not copied here) has
  no row in its table of docs/settings.md;
- a management command of django_zqueue/management/commands/ has no section in
  docs/commands.md;
- a page of mkdocs.yml's ``nav`` is missing from README.md's links (the API reference's
  pages are reached through docs/reference/index.md, which must then link each of them).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from django_zqueue import conf

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted([*DOCS.rglob("*.md"), ROOT / "README.md"])

#: "issue 19", "Issue #4", "issues 15 and 16": one of ours, by its number
ISSUE = re.compile(r"\b[Ii]ssues?\s+#?\d+")
#: "#23" standing alone: an issue or pull-request number. Not a link's anchor
#: ("(#1-install)"), an HTML entity ("&#39;"), a key's partition ("{zq:emails#0}") or a
#: heading's hashes ("## 1."), which all have a word character, "(", "&", "/", "#" or
#: "{" before the "#".
HASH_REF = re.compile(r"(?<![\w(&/#{:])#\d+\b")
#: "run 6", "runs 1-6", "runs 3, 4 and 5", "runs (3, 4 and 5)", "Run 4 (2026-11-21)": a
#: benchmark run by its number. Not a count of things that run ("run 5 workers", "runs 3
#: times", "run 2 at once"): a number followed by a plural noun or by
#: at/in/per/a/an/each/every is left alone, and so are a decimal ("the run 4.84 ms": a
#: figure), a date ("Run 2026-11-24 twice") and "a run (0 early starts)".
RUN = re.compile(
    r"\b(?:[Rr]uns?\s+|[Rr]uns\s+\()\d{1,3}\b(?![.,]\d)(?:\s*(?:[-\u2013,]|and|to)\s*\d{1,3}\b)*"
    r"(?!\s+(?:[A-Za-z]+s|at|in|per|a|an|each|every)\b)"
)


def lines_of(page: Path) -> Iterator[tuple[int, str]]:
    yield from enumerate(page.read_text().splitlines(), start=1)


def citations(text: str) -> list[str]:
    return [m.group(0) for rx in (ISSUE, HASH_REF, RUN) for m in rx.finditer(text)]


@pytest.mark.parametrize(
    "text",
    [
        "as issue 19 asked",
        "Issue 23's targets",
        "see issue #4",
        "fixed in #23.",
        "Side by side (run 6)",
        "runs 1-6",
        "runs 1\u20136",  # an en dash
        "Earlier side-by-side runs (3, 4 and 5)",
        "runs 3, 4 and 5",
        "Run 4 (2026-11-21)",
        "in run 4 by 16-23 %",
        "`python -m bench --peers`, run 6 of 2026-11-24",
    ],
)
def test_the_patterns_catch_a_citation(text: str) -> None:
    assert citations(text), text


@pytest.mark.parametrize(
    "text",
    [
        "python manage.py zqueue_worker --processes 2: run 5 workers",
        "a job runs 3 times at most",
        "run 2 at once",
        "the longest call of the run 4.84 ms",
        "Run 2026-11-24 twice, the figures agree",
        "each parent had finished a run (0 early starts)",
        "[1. Install](#1-install)",
        "`{zq:emails#0}` is partition 0",
        "&#39; is an apostrophe",
        "## 10. The demo",
        "Every run is one script call; runs of the same tree move by 1.8x",
        "the issue tracker of another project",
    ],
)
def test_the_patterns_leave_other_text_alone(text: str) -> None:
    assert not citations(text), text


def test_no_page_cites_an_issue_or_a_run() -> None:
    found = [
        f"{page.relative_to(ROOT)}:{n}: {hit!r} in {line.strip()[:100]!r}"
        for page in PAGES
        for n, line in lines_of(page)
        for hit in citations(line)
    ]
    assert not found, "history belongs in CHANGELOG.md:\n" + "\n".join(found)


def section(text: str, heading: str) -> str:
    """The text of the ``## heading`` section (its ``###`` subsections included)."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def table_keys(text: str) -> set[str]:
    """The first cells of the table rows: ``| `KEY` | ...``."""
    return set(re.findall(r"^\|\s*`([^`]+)`\s*\|", text, flags=re.M))


def test_every_settings_key_and_queue_option_has_a_row_in_settings_md() -> None:
    text = (DOCS / "settings.md").read_text()
    top = conf.TOP_LEVEL_KEYS - table_keys(section(text, "Top-level keys"))
    queue = conf.QUEUE_KEYS - table_keys(section(text, "Queue options"))
    assert conf.TOP_LEVEL_KEYS and conf.QUEUE_KEYS  # (the names conf.py keeps them under)
    assert not top, f"top-level ZQUEUE keys missing from docs/settings.md: {sorted(top)}"
    assert not queue, f"queue options missing from docs/settings.md: {sorted(queue)}"


def test_every_public_name_of_queue_has_a_row_in_queue_md() -> None:
    """Queue keeps a small API (the plumbing is its engine's), each name documented in the
    table of docs/queue.md, "Every public name"."""
    from django_zqueue.queue import Queue

    names = [n for n in dir(Queue) if not n.startswith("_")]
    rows = section((DOCS / "queue.md").read_text(), "Every public name")
    missing = [n for n in names if f"`{n}" not in rows]
    assert len(names) <= 50, f"Queue has {len(names)} public names: {names}"
    assert not missing, f"public names of Queue missing from docs/queue.md: {missing}"


def test_every_management_command_has_a_section_in_commands_md() -> None:
    commands = {
        p.stem
        for p in (ROOT / "django_zqueue" / "management" / "commands").glob("*.py")
        if not p.stem.startswith("_")
    }
    text = (DOCS / "commands.md").read_text()
    documented = set(re.findall(r"^#{2,4}\s+`?(\w+)`?\s*$", text, flags=re.M))
    assert commands, "no command found: has the folder moved?"
    missing = commands - documented
    assert not missing, f"commands without a section in docs/commands.md: {sorted(missing)}"


class _Loader(yaml.SafeLoader):
    """mkdocs.yml has tags such as ``!!python/object/apply`` (the slugify function):
    read them as None instead of refusing or running them."""


def _ignore_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> None:
    return None


_Loader.add_multi_constructor("", _ignore_tag)  # any tag the safe loader does not know
_Loader.add_multi_constructor("tag:yaml.org,2002:python/", _ignore_tag)


def nav_pages(nav: Any) -> Iterator[str]:
    if isinstance(nav, str):
        if nav.endswith(".md"):
            yield nav
    elif isinstance(nav, list):
        for item in nav:
            yield from nav_pages(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            yield from nav_pages(value)


def links(text: str) -> set[str]:
    """The targets of a page's Markdown links, without their anchors."""
    return {m.split("#")[0] for m in re.findall(r"\]\(([^)\s]+)\)", text)}


def test_readme_links_every_page_of_the_nav() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)
    pages = set(nav_pages(config["nav"]))
    assert "index.md" in pages and len(pages) > 10
    for page in pages:
        assert (DOCS / page).is_file(), f"mkdocs.yml's nav lists {page}, which does not exist"
    readme = {p.removeprefix("docs/") for p in links((ROOT / "README.md").read_text())}
    reference = {p for p in pages if p.startswith("reference/")}
    # the README is the site's home page on GitHub: it stands for index.md itself
    wanted = pages - reference - {"index.md"} | {"reference/index.md"}
    missing = wanted - readme
    assert not missing, f"README.md's documentation links miss: {sorted(missing)}"
    overview = {f"reference/{p}" for p in links((DOCS / "reference" / "index.md").read_text())}
    missing = reference - {"reference/index.md"} - overview
    assert not missing, f"docs/reference/index.md does not link: {sorted(missing)}"
