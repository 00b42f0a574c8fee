"""The package's shape (docs/architecture.md, "The code: where each concern lives").

- **Folders are layers.** Each module belongs to the layer of its folder (or, at the
  package root, of its own name), and imports only from its layer and those below it.
  Every form of import counts: relative, absolute, ``import django_zqueue``, ``from
  django_zqueue import x``, inside a function or under ``TYPE_CHECKING``, and
  ``importlib.import_module("django_zqueue...")``.
- **No import cycle** between modules, the package root counted.
- **No reach into another module's private names.**
- **Only the engine knows Redis.** Outside ``engine/`` no module holds or uses a Redis
  client, sends a command or builds a key, however it is reached: ``.client``,
  ``.pipeline``, ``execute_command``, ``from_url``, the engine's keys, shards or scripts
  (``.keys`` bound to a name included), ``getattr`` with a computed name, a key-shaped
  string or f-string, and ``import redis`` for anything but its exception classes.

The cheat snippets at the end of this file are proof that each rule can fail.
docs/architecture.md's layer table is checked against :data:`LAYERS`.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "django_zqueue"
PKG = "django_zqueue"

#: bottom up: (name, the folders and root modules of the layer, what lives there). A module
#: may import from its own layer and the layers below it.
LAYERS: list[tuple[str, set[str], str]] = [
    (
        "settings",
        {"conf", "exceptions", "version", "events", "signals"},
        "`ZQUEUE` read and checked; bounds; exceptions; the version; log lines and signals",
    ),
    (
        "engine",
        {"engine"},
        "the one room that knows Redis: connection, keys, Lua scripts, calls and replies, "
        "records and their codec, the job spec",
    ),
    ("read", {"read"}, "the read side: counts, listings, one job, for every face above"),
    ("queue", {"queue"}, "`Queue`: the write side and consuming, over the engine's verbs"),
    (
        "tasks",
        {"tasks"},
        "`@task`, `Job`, schedules, workflows, durable tasks, the outbox, the Django Tasks backend",
    ),
    ("worker", {"worker"}, "the worker, its runner and leases, and the scanner"),
    (
        "faces",
        {
            "admin",
            "ops",
            "web",
            "management",
            "templatetags",
            "migrations",
            "apps",
            "models",
            "urls",
            "backends",
            "metrics",
            "periodic",
            "testing",
            PKG,
        },
        "the admin, the operator's tools (doctor, metrics, checks, commands), what a site "
        "shows its users, Django's fixed places and the public import paths",
    ),
]


def layer_of(module: str) -> int:
    """The layer of a module named by its dotted path (``django_zqueue`` for the root)."""
    head = module.split(".")[1] if module.startswith(PKG + ".") else module
    for i, (_, names, _) in enumerate(LAYERS):
        if head in names:
            return i
    raise AssertionError(f"{module} is in no layer: add its folder to LAYERS")


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by its dotted path (a package by its ``__init__``)."""
    found = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join([PKG, *parts])] = path
    return found


MODULES = modules()


def _resolve(name: str, known: set[str]) -> str:
    """The module ``name`` names: itself if it is one, else its longest module prefix
    (``x.y.Name`` -> ``x.y``)."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in known:
            return ".".join(parts[:n])
    return name


def imports(module: str, source: str, known: set[str]) -> list[tuple[str, list[str]]]:
    """(module imported, names taken from it) for every import of the package made by
    ``module`` (whose text is ``source``), in any form."""
    tree = ast.parse(source)
    is_pkg = module in known and MODULES.get(module, Path("x.py")).name == "__init__.py"
    here = module.split(".") if is_pkg else module.split(".")[:-1]
    out: list[tuple[str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            elif node.module and (node.module == PKG or node.module.startswith(PKG + ".")):
                target = node.module
            else:
                continue
            for a in node.names:  # "from x import y": y may be a module of its own
                sub = f"{target}.{a.name}"
                if sub in known:
                    out.append((sub, []))
                else:
                    out.append((_resolve(target, known), [a.name]))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name == PKG or a.name.startswith(PKG + "."):
                    out.append((_resolve(a.name, known), []))
        elif isinstance(node, ast.Call) and _called(node) in ("import_module", "__import__"):
            arg = node.args[0] if node.args else None
            named = isinstance(arg, ast.Constant) and isinstance(arg.value, str)
            if named and (arg.value == PKG or arg.value.startswith(PKG + ".")):
                out.append((_resolve(arg.value, known), []))
    return out


def _called(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _graph() -> dict[str, set[str]]:
    known = set(MODULES)
    return {
        m: {t for t, _ in imports(m, p.read_text(encoding="utf-8"), known) if t != m}
        for m, p in MODULES.items()
    }


GRAPH = _graph()


# ------------------------------------------------------------------ layers and cycles


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_come_from_below(module: str) -> None:
    own = layer_of(module)
    above = sorted(t for t in GRAPH[module] if layer_of(t) > own)
    assert not above, f"{module} ({LAYERS[own][0]}) imports from above: {above}"


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` as a path (its first node repeated at the end), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                return [*stack[stack.index(t) :], t]
            if t not in state:
                found = visit(t)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_no_import_cycle() -> None:
    cycle = find_cycle(GRAPH)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _folder(module: str) -> str:
    return ".".join(module.split(".")[:2])


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_private_name_of_another_module(module: str) -> None:
    source = MODULES[module].read_text(encoding="utf-8")
    for target, names in imports(module, source, set(MODULES)):
        if _folder(target) == _folder(module) and target != PKG:
            continue  # within one folder (engine/, queue/, worker/ ...)
        private = [n for n in names if n.startswith("_") and not n.startswith("__")]
        assert not private, f"{module} takes private {private} from {target}"


# ------------------------------------------------------------------ only the engine knows Redis

#: attributes that reach a client, a command, a pipeline, or the engine's keys, shards
#: and scripts
REDIS_ATTRIBUTES = {
    "client",
    "aclient",
    "pipeline",
    "execute_command",
    "from_url",
    "sched_keys",
    "shards",
    "shard_for",
    "part_keys",
    "keys_for",
    "keys_of",
    "scripts",
}
#: names that make a client
CLIENT_MAKERS = {
    "get_client",
    "get_async_client",
    "make_async_client",
    "Redis",
    "RedisCluster",
    "StrictRedis",
    "Sentinel",
}
#: what a key looks like: a hash tag then a colon and a name (``{zq:default}:ready``; in
#: an f-string's text, a replacement field reads as ``X``: ``{X:X}:ready``)
KEY_SHAPE = re.compile(r"\{[^{}\s'\"]+\}:\w")


def _redis_module(name: str | None) -> bool:
    return name is not None and (name == "redis" or name.startswith("redis."))


def _exception_name(name: str) -> bool:
    return name.endswith(("Error", "Exception")) or name in {"exceptions", "RedisError"}


def _folded(node: ast.AST | None, names: dict[str, ast.AST]) -> str | None:
    """The text an expression always has (a constant, constants added or joined, or a
    name bound once to one of these), or None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _folded(node.left, names), _folded(node.right, names)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.JoinedStr):
        parts = [_folded(v, names) for v in node.values]
        return None if None in parts else "".join(p for p in parts if p is not None)
    if isinstance(node, ast.Name) and node.id in names:
        return _folded(names.pop(node.id), names)  # (popped: no loop on x = x + ...)
    return None


def _template(node: ast.JoinedStr) -> str:
    """An f-string's text with each replacement field as ``X``."""
    return "".join(
        v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "X"
        for v in node.values
    )


def redis_uses(source: str) -> list[str]:
    """What in ``source`` reaches Redis other than through the engine's verbs, each as a
    short description with its line (empty: nothing)."""
    tree = ast.parse(source)
    found: list[str] = []
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    bound: dict[str, ast.AST] = {}  # names bound once, by a plain assignment
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            bound[n.targets[0].id] = n.value
    redis_names = set()  # names "import redis" binds
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Attribute):
            if node.attr.lstrip("_") in REDIS_ATTRIBUTES:  # public, or the engine's private
                found.append(f"line {line}: .{node.attr}")
            elif node.attr in ("keys", "_keys") and id(node) not in called:
                found.append(f"line {line}: .keys (the engine's key names)")
            elif node.attr in CLIENT_MAKERS and id(node) in called:
                found.append(f"line {line}: {node.attr}(...)")
        elif isinstance(node, ast.Name) and node.id in CLIENT_MAKERS and id(node) in called:
            found.append(f"line {line}: {node.id}(...)")
        elif isinstance(node, ast.Call) and _called(node) == "getattr" and len(node.args) >= 2:
            name = _folded(node.args[1], dict(bound))
            if name is not None and name.lstrip("_") in {*REDIS_ATTRIBUTES, "keys"}:
                found.append(f"line {line}: getattr(..., {name!r})")
        elif isinstance(node, ast.JoinedStr):
            if KEY_SHAPE.search(_template(node)):
                found.append(f"line {line}: a key-shaped f-string")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if KEY_SHAPE.match(node.value):
                found.append(f"line {line}: a key-shaped string {node.value[:40]!r}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "redis":
                    redis_names.add(a.asname or "redis")
                elif _redis_module(a.name) and a.name != "redis.exceptions":
                    found.append(f"line {line}: import {a.name}")
        elif isinstance(node, ast.ImportFrom) and not node.level and _redis_module(node.module):
            bad = [a.name for a in node.names if not _exception_name(a.name)]
            if node.module != "redis.exceptions" and bad:
                found.append(f"line {line}: from {node.module} import {bad}")
    for node in ast.walk(tree):  # "import redis": for its exception classes only
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in redis_names
            and not _exception_name(node.attr)
            and node.attr != "__version__"
        ):
            found.append(f"line {node.lineno}: redis.{node.attr}")
    return found


def _outside_engine() -> list[str]:
    return sorted(m for m in MODULES if layer_of(m) != 1 and not m.startswith(f"{PKG}.migrations"))


#: modules outside engine/ that still reach Redis themselves: this list may only shrink
#: (a module that stops must leave it; the test says so), and no other module may start
REDIS_USERS_OUTSIDE: set[str] = set()


@pytest.mark.parametrize("module", _outside_engine())
def test_only_the_engine_knows_redis(module: str) -> None:
    uses = redis_uses(MODULES[module].read_text(encoding="utf-8"))
    if module in REDIS_USERS_OUTSIDE:
        assert uses, f"{module} no longer reaches Redis: take it off REDIS_USERS_OUTSIDE"
    else:
        assert not uses, f"{module} reaches Redis itself (ask the engine): {uses}"


# ------------------------------------------------------------------ the docs' layer table


def test_the_architecture_docs_show_these_layers() -> None:
    """docs/architecture.md's layer table names each layer of LAYERS, bottom up, with
    exactly its folders and root modules."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    start = text.index("| layer | folders and modules |")
    rows = []
    for row in text[start:].splitlines()[2:]:
        if not row.startswith("|"):
            break
        cells = [c.strip() for c in row.strip("|").split("|")]
        names = {n.strip("`/").removesuffix(".py") for n in re.findall(r"`[^`]+`", cells[1])}
        rows.append((cells[0], names))
    want = [(name, {PKG if n == PKG else n for n in names}) for name, names, _ in LAYERS]
    got = [(name, {PKG if n == PKG else n for n in names}) for name, names in rows]
    assert got == want


def test_every_folder_and_root_module_is_in_a_layer() -> None:
    heads = {p.name.removesuffix(".py") for p in PACKAGE.iterdir()}
    heads = {h for h in heads if (PACKAGE / h).is_dir() and (PACKAGE / h / "__init__.py").exists()}
    heads |= {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    for head in sorted(heads):
        layer_of(f"{PKG}.{head}")


def test_the_package_root_holds_at_most_15_modules() -> None:
    assert len(list(PACKAGE.glob("*.py"))) <= 15


# ------------------------------------------------------------------ the checkers can fail

CHEATS = {
    "a computed attribute name": (
        "def f(q):\n    return getattr(q.engine, 'cli' + 'ent').get('x')\n"
    ),
    "a client made from a URL": (
        "import redis\n\ndef f(url):\n"
        "    return redis.Redis.from_url(url).execute_command('GET', 'x')\n"
    ),
    "the engine's keys bound to a name": "def f(q):\n    ks = q.engine.keys\n    return ks.ready\n",
    "a key-shaped f-string": "def f(p, name):\n    return f'{{{p}:{name}}}:ready'\n",
    "a key-shaped string": "KEY = '{zq:default}:ready'\n",
    "a name made of constants": (
        "def f(q):\n    name = 'cli' + 'ent'\n    return getattr(q.engine, name).get('x')\n"
    ),
    "redis used past its exceptions": "import redis\n\ndef f():\n    return redis.Redis()\n",
    "a pipeline": "def f(e):\n    with e.pipeline() as p:\n        p.get('x')\n",
    "a client": "def f(q):\n    return q.client.get('x')\n",
    "a shard's call built above": (
        "def f(q, tag):\n    return q.engine.shard_for(tag).claim(1, 'w')\n"
    ),
    "redis imported for a client": "from redis import Redis\n",
    "the engine's private client": "def f(q):\n    return q.engine._client.get('x')\n",
    "the engine's private keys": "def f(q):\n    return q.engine._keys.ready\n",
    "a private name made of constants": (
        "def f(q):\n    return getattr(q.engine, '_cli' + 'ent').get('x')\n"
    ),
    "a client maker": "from x import get_client\n\ndef f():\n    return get_client()\n",
}


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_the_redis_checker_sees_each_cheat(name: str) -> None:
    assert redis_uses(CHEATS[name]), name


def test_the_redis_checker_lets_honest_code_pass() -> None:
    source = (
        "from redis.exceptions import ResponseError\nimport redis\n\n"
        "def f(d, q, tag, field):\n"
        "    try:\n        x = getattr(q, field)\n"
        "        return list(d.keys()), q.engine.results.raw(tag), f'{tag}:x', x\n"
        "    except (ResponseError, redis.RedisError, redis.exceptions.ConnectionError):\n"
        "        return f\"expected {{'args': [...]}}, got {tag!r}\"\n"
    )
    assert redis_uses(source) == []


@pytest.mark.parametrize(
    "source",
    [
        "import django_zqueue\n",
        "from django_zqueue import worker\n",
        "from django_zqueue import task\n",
        "from ... import worker\n",
        "def f():\n    from django_zqueue.worker.consumer import Consumer\n",
        "import importlib\nimportlib.import_module('django_zqueue.admin')\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ...queue import Queue\n",
    ],
)
def test_the_import_reader_sees_every_form(source: str) -> None:
    """Each snippet, put in ``engine/scripts/x.py``, imports from above the engine."""
    module = f"{PKG}.engine.scripts.x"
    known = set(MODULES) | {module}
    found = {t for t, _ in imports(module, source, known)}
    assert found and all(layer_of(t) > layer_of(module) for t in found), found


def test_the_cycle_finder_counts_the_package_root() -> None:
    graph = {
        PKG: {f"{PKG}.tasks.task"},
        f"{PKG}.tasks.task": {f"{PKG}.engine.scripts"},
        f"{PKG}.engine.scripts": {PKG},
    }
    assert find_cycle(graph) == [PKG, f"{PKG}.tasks.task", f"{PKG}.engine.scripts", PKG]
    assert find_cycle({PKG: {f"{PKG}.x"}, f"{PKG}.x": set()}) is None
