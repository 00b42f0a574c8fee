"""The package's shape: layers that import only from below, no import cycle, no reach into
another module's private names (docs/architecture.md, "The code: where each concern lives")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "django_zqueue"

#: bottom up; a module may import from its own layer and the layers below it
LAYERS: list[set[str]] = [
    {
        "conf",
        "conf_queue",
        "bounds",
        "redis_url",
        "exceptions",
        "embedded",
        "signals",
        "fairness",
        "version",
    },  # settings
    {"connection", "aconnection", "backoff", "events"},  # connection
    {
        "keys",
        "scripts",
        "luasource",
        "calls",
        "records",
        "recordcodec",
        "jobspec",
        "replies",
        "links",
        "validate",
        "serializer",
        "registry",
        "attempts",
    },  # keys, scripts
    {"engine", "queue", "read"},  # queue core: engine, write side, read side
    {
        "task",
        "job",
        "callcheck",
        "schedules",
        "schedule_ops",
        "schedule_spec",
        "periodic",
        "backends",
        "_django_tasks",
        "outcome",
        "context",
        "durable",
        "watch",
        "taskstats",
        "tracing",
        "workflow",
        "workflow_plan",
        "outbox",
        "oncommit",
    },  # tasks
    {"worker", "backend_runner", "dbconn", "scanner"},  # worker and scanner
    {
        "dashboard",
        "dashboard_lists",
        "dashboard_text",
        "admin",
        "admin_actions",
        "admin_base",
        "admin_pages",
        "admin_bulk",
        "admin_durable",
        "admin_outbox",
        "admin_paging",
        "admin_search",
        "metrics",
        "checks",
        "doctor",
        "management",
        "apps",
        "models",
        "position",
        "display",
        "actions",
        "workers_page",
        "schedules_page",
        "filters",
        "urls",
        "templatetags",
        "humanize",
        "charts",
    },
]


def _layer_of(module: str) -> int:
    top = module.split(".")[0]
    for i, names in enumerate(LAYERS):
        if top in names:
            return i
    raise AssertionError(f"django_zqueue.{module} is in no layer: add it to LAYERS")


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).with_suffix("")
        parts = list(rel.parts)
        if parts[0] == "migrations" or parts == ["__init__"]:
            continue  # the package's face re-exports from every layer
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imports(module: str, path: Path) -> list[tuple[str, list[str]]]:
    """(imported module, names taken from it) for every import of a package module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            elif node.module and node.module.startswith("django_zqueue."):
                target = node.module.removeprefix("django_zqueue.")
            else:
                continue
            names = [a.name for a in node.names]
            if not target:  # "from . import x": x is a module
                out.extend((n, []) for n in names)
            else:
                out.append((target, names))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("django_zqueue."):
                    out.append((a.name.removeprefix("django_zqueue."), []))
    return out


MODULES = _modules()


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_come_from_below(module: str) -> None:
    own = _layer_of(module)
    for target, _ in _imports(module, MODULES[module]):
        assert _layer_of(target) <= own, f"{module} (layer {own}) imports {target} from above"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_private_name_of_another_module(module: str) -> None:
    for target, names in _imports(module, MODULES[module]):
        if target.split(".")[0] == module.split(".")[0]:
            continue  # within one package (queue/, read/, worker/)
        private = [n for n in names if n.startswith("_") and not n.startswith("__")]
        assert not private, f"{module} takes private {private} from {target}"


def test_no_import_cycle() -> None:
    graph = {
        m: {t for t, _ in _imports(m, p) if t in MODULES and t != m} for m, p in MODULES.items()
    }
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for t in graph[m]:
            if state.get(t) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*path, m, t]))
            if t not in state:
                visit(t, [*path, m])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])


def _imports_the_root(path: Path) -> list[str]:
    """The imports of the package's face (``__init__.py``) in a module: ``import
    django_zqueue`` or ``from django_zqueue import ...``, wherever they stand (a function's
    body too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name == "django_zqueue"]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module == "django_zqueue":
            found.append(f"from django_zqueue import {', '.join(a.name for a in node.names)}")
    return found


def test_no_module_imports_the_package_face() -> None:
    """``__init__.py`` imports from every layer, so a module that imports it back closes
    an import loop through it (the version lives in ``version.py`` for that reason)."""
    found = {m: names for m, p in MODULES.items() if (names := _imports_the_root(p))}
    assert not found, f"modules import the package's face: {found}"


def test_the_face_checker_sees_an_import(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("def version():\n    import django_zqueue\n    return django_zqueue\n")
    assert _imports_the_root(path) == ["import django_zqueue"]
    path.write_text("from django_zqueue import Queue\nfrom django_zqueue.conf import parse\n")
    assert _imports_the_root(path) == ["from django_zqueue import Queue"]
    path.write_text('"""from django_zqueue import task"""\nfrom . import conf\n')
    assert _imports_the_root(path) == []


def test_the_checker_sees_a_violation() -> None:
    """The rules above can fail: a module of the bottom layer importing the worker."""
    assert _layer_of("conf") < _layer_of("worker.consumer")
    tree_imports = _imports("conf", PACKAGE / "conf.py")
    assert all(_layer_of(t) == 0 for t, _ in tree_imports)


# ------------------------------------------------------------------ the Redis client

#: below this layer (settings, connection, keys/scripts, queue core) a module may hold and
#: use a Redis client; above it, it asks the queue core
CLIENT_LAYER = 3
#: modules above the queue core that still use a Redis client themselves (the engine,
#: ``queue.engine``, is to own that): this list may only shrink. A module that stops using
#: the client must leave it (the test says so), and no other module may start.
CLIENT_USERS_ABOVE: set[str] = set()


def _uses_a_client(path: Path) -> bool:
    """Whether a module reaches a Redis client: an attribute ``.client``, a pipeline, or
    one of the connection module's client makers."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("client", "pipeline"):
            return True
        if isinstance(node, ast.Name) and node.id in ("get_client", "make_async_client"):
            return True
    return False


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _layer_of(m) > CLIENT_LAYER))
def test_above_the_queue_core_only_the_listed_modules_touch_a_redis_client(
    module: str,
) -> None:
    uses = _uses_a_client(MODULES[module])
    if module in CLIENT_USERS_ABOVE:
        assert uses, f"{module} no longer touches a Redis client: take it off the list"
    else:
        assert not uses, (
            f"{module} touches a Redis client: ask the queue core (queue/, read/) instead"
        )


def test_the_client_checker_sees_a_client(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("def f(q):\n    return q.client.get('x')\n")
    assert _uses_a_client(path)
    path.write_text("def f(q):\n    return q.counts()\n")
    assert not _uses_a_client(path)


# ------------------------------------------------------------------ key names

#: modules above the queue core that still build a key name themselves (the engine is to
#: own that): this list may only shrink, as CLIENT_USERS_ABOVE
KEY_BUILDERS_ABOVE: set[str] = set()

#: what building a key looks like: the key makers of ``keys.py`` by name, a queue's
#: ``keys`` (``q.keys.ready``, ``q.keys.result(tag)``), its schedules' keys, or a key
#: lookup of the engine
KEY_MAKERS = {"queue_keys", "partition_keys", "layout_key", "QueueKeys", "typed_keys"}
KEY_ATTRIBUTES = {"sched_keys", "part_keys", "keys_for", "keys_of"}


def _builds_a_key(path: Path) -> bool:
    """Whether a module builds a key name: ``<x>.keys.<name>``, one of ``KEY_ATTRIBUTES``
    or a key maker of ``keys.py`` (``dict.keys()`` is not one)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr in KEY_ATTRIBUTES or node.attr in KEY_MAKERS:
                return True
            if isinstance(node.value, ast.Attribute) and node.value.attr == "keys":
                return True  # q.keys.ready, q.engine.keys.stats, shard.keys.result(...)
        if isinstance(node, ast.Name) and node.id in KEY_MAKERS:
            return True
        if isinstance(node, ast.ImportFrom) and any(a.name in KEY_MAKERS for a in node.names):
            return True
    return False


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _layer_of(m) > CLIENT_LAYER))
def test_above_the_queue_core_only_the_listed_modules_build_a_key(module: str) -> None:
    builds = _builds_a_key(MODULES[module])
    if module in KEY_BUILDERS_ABOVE:
        assert builds, f"{module} no longer builds a key name: take it off the list"
    else:
        assert not builds, f"{module} builds a key name: ask the queue or its engine instead"


@pytest.mark.parametrize(
    "source",
    [
        "def f(q):\n    return q.keys.ready\n",
        "def f(q, tag):\n    return q.engine.keys_for(tag).result(tag)\n",
        "def f(q):\n    return [k.meta for k in q.engine.part_keys]\n",
        "def f(q):\n    return q.sched_keys.sched\n",
        "from django_zqueue.keys import queue_keys\n",
        "def f(keys):\n    return keys.queue_keys('zq', 'default').ready\n",
        "def f(s, tag):\n    return s.keys.result(tag)\n",
    ],
)
def test_the_key_checker_sees_a_key_built(tmp_path: Path, source: str) -> None:
    path = tmp_path / "m.py"
    path.write_text(source)
    assert _builds_a_key(path), source


def test_the_key_checker_lets_dict_keys_and_the_engine_pass(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("def f(d, q, tag):\n    return list(d.keys()), q.engine.result_raw(tag)\n")
    assert not _builds_a_key(path)
