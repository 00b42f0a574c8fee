"""Rooms within size: no module of the package over 600 lines, no class over 400, no
function over 60. A room past its size is split along a line a newcomer would recognise;
OVER_SIZE lists the few that still wait for it, and may only shrink."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "django_zqueue"
LIMITS = {"module": 600, "class": 400, "function": 60}

#: rooms past their size, as ``path:name`` (a module: its path); this list may only shrink
OVER_SIZE: set[str] = set()


def rooms(source: str, path: str) -> list[tuple[str, str, int]]:
    """(kind, ``path:name``, lines) of the module and every class and function in it."""
    tree = ast.parse(source)
    found = [("module", path, source.count("\n"))]

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                kind = "class" if isinstance(child, ast.ClassDef) else "function"
                name = f"{prefix}{child.name}"
                size = (child.end_lineno or child.lineno) - child.lineno + 1
                found.append((kind, f"{path}:{name}", size))
                walk(child, f"{name}.")
            else:
                walk(child, prefix)

    walk(tree, "")
    return found


def too_big(source: str, path: str) -> list[str]:
    return [name for kind, name, size in rooms(source, path) if size > LIMITS[kind]]


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "migrations" not in p.parts)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_room_is_within_its_size(path: Path) -> None:
    rel = str(path.relative_to(PACKAGE))
    over = too_big(path.read_text(encoding="utf-8"), rel)
    assert not [n for n in over if n not in OVER_SIZE], f"past its size, split it: {over}"
    listed = {n for n in OVER_SIZE if n == rel or n.startswith(f"{rel}:")}
    assert listed <= set(over), f"within size now: take {sorted(listed - set(over))} off OVER_SIZE"


def test_every_listed_room_exists() -> None:
    for name in OVER_SIZE:
        assert (PACKAGE / name.split(":")[0]).exists(), name


def test_the_checker_sees_each_kind_of_room() -> None:
    long_body = "\n".join(f"    x{i} = {i}" for i in range(61))
    source = f"class A:\n    def f(self):\n    {long_body.replace(chr(10), chr(10) + '    ')}\n"
    assert too_big(source, "m.py") == ["m.py:A.f"]
    assert too_big("x = 1\n" * 601, "m.py") == ["m.py"]
    big_class = "class B:\n" + "".join(
        f"    def f{i}(self):\n        return {i}\n" for i in range(201)
    )
    assert too_big(big_class, "m.py") == ["m.py:B"]
    nested = "def outer():\n    def inner():\n" + "".join(
        f"        y{i} = {i}\n" for i in range(60)
    )
    assert too_big(nested, "m.py") == ["m.py:outer", "m.py:outer.inner"]
