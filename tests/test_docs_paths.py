"""Every module path a doc page names is true: a file path (``engine/lua/ack.lua``,
``django_zqueue/queue/publish.py``, ``tests/test_wait.py``), a script or test file by its
name (``claim.lua``, ``test_wait.py``) or a dotted name (``django_zqueue.engine.reads``,
``django_zqueue.tasks.task.Task``) names something that exists. A user's own file
(``tasks.py``, ``mysite/settings.py``) is not the package's and is not checked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "django_zqueue"
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
#: folders of the repository, not of the package
REPO_FOLDERS = {"tests", "bench", "testproject", ".ci", "docs"}
#: folders a path may start with that are the user's, not ours
USER_FOLDERS = {"mysite", "myproject", "myapp", "app", "project"}

#: names a page may give that are not module paths: the package's logger names, system
#: check ids (``django_zqueue.E001``) and permissions (``django_zqueue.view_queue``)
LOGGERS = set(
    re.findall(
        r'getLogger\("([\w.]+)"\)',
        "".join(p.read_text(encoding="utf-8") for p in PKG.rglob("*.py")),
    )
)
NOT_PATHS = re.compile(r"django_zqueue\.(?:[EW]\d{3}|(?:view|add|change|delete|manage)_\w+)")
#: files of another project a page names (Django's own test suite, a peer's sdist)
ELSEWHERE = {"test_dummy_backend.py", "test_custom_backend.py", "tests/tests.py"}

PATH = re.compile(r"[\w.]+(?:/[\w.]+)+\.(?:py|lua)")
DOTTED = re.compile(r"django_zqueue(?:\.\w+)+")
BARE = re.compile(r"(?:test_\w+\.py|\w+\.lua)")


def _tokens(text: str) -> list[str]:
    return [m.group(1).split("(")[0].rstrip(".,:;") for m in re.finditer(r"`([^`\s]+)`", text)]


def path_is_true(token: str) -> bool | None:
    """Whether a path token names a file; None when it is not ours to check."""
    if token in ELSEWHERE:
        return None
    if PATH.fullmatch(token):
        rel = token.removeprefix("django_zqueue/")
        head = rel.split("/")[0]
        if head in USER_FOLDERS:
            return None
        if head in REPO_FOLDERS:
            return (ROOT / rel).exists()
        return (PKG / rel).exists()
    if BARE.fullmatch(token):
        where = ROOT / "tests" if token.startswith("test_") else PKG / "engine" / "lua"
        return any(where.rglob(token))
    return None


def dotted_is_true(token: str) -> bool | None:
    """Whether ``django_zqueue.a.b.C`` names a module, or a name a module defines."""
    if not DOTTED.fullmatch(token) or token in LOGGERS or NOT_PATHS.fullmatch(token):
        return None
    parts = token.split(".")
    for i in range(len(parts), 0, -1):
        base = PKG.joinpath(*parts[1:i])
        source = (
            base.with_suffix(".py") if base.with_suffix(".py").exists() else base / "__init__.py"
        )
        if source.exists():
            rest = parts[i:]
            if not rest:
                return True
            return re.search(rf"\b{re.escape(rest[0])}\b", source.read_text("utf-8")) is not None
    return False


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_path_a_page_names_exists(page: Path) -> None:
    wrong = []
    for token in _tokens(page.read_text(encoding="utf-8")):
        for check in (path_is_true, dotted_is_true):
            if check(token) is False:
                wrong.append(token)
    assert not wrong, f"{page.name} names what does not exist: {sorted(set(wrong))}"


@pytest.mark.parametrize(
    "token",
    [
        "lua/claim.lua",  # the scripts live in engine/lua/
        "django_zqueue/scanner.py",  # moved to worker/
        "queue/nowhere.py",
        "nowhere.lua",
        "test_nowhere.py",
        "django_zqueue.nowhere",
        "django_zqueue.engine.NoSuchVerb",
    ],
)
def test_a_wrong_path_is_caught(token: str) -> None:
    assert False in (path_is_true(token), dotted_is_true(token))


@pytest.mark.parametrize(
    "token",
    [
        "engine/lua/claim.lua",
        "django_zqueue/queue/core.py",
        "claim.lua",
        "test_layers.py",
        "tests/test_layers.py",
        "django_zqueue.engine.reads",
        "django_zqueue.scanner",  # a logger's name
        "django_zqueue.E001",
        "django_zqueue.view_queue",
        "django_zqueue.engine.Engine",
        "mysite/settings.py",
        "tasks.py",
    ],
)
def test_a_true_path_passes(token: str) -> None:
    assert False not in (path_is_true(token), dotted_is_true(token))
