"""Griffe extension for the docs build (mkdocs.yml loads it): reST markup in docstrings.

The package's docstrings use Sphinx roles (``:class:`Job```, ``:meth:`Queue.ack```) and
``::`` before literal blocks. mkdocstrings renders docstrings as Markdown, where those
would show up verbatim. This rewrites them, in the docs build only:

- a role whose target resolves to an object rendered in the API reference becomes a
  cross-reference link (``[`Job`][django_zqueue.tasks.job.Job]``), so strict mode checks it;
- any other role becomes inline code;
- a trailing ``::`` becomes ``:`` (the indented block after it is already code);
- a class attribute without a docstring (a dataclass field) gets its trailing ``#``
  comment as its docstring: ``max_retries: int | None = None  # None: the queue's option``.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|meth|func|mod|attr|exc|data|obj|const):`(~?)([^`]+)`")

# Objects the reference pages render (docs/reference/*.md), with everything under them.
DOCUMENTED = (
    "django_zqueue.queue.Queue",
    "django_zqueue.queue.get_queue",
    "django_zqueue.queue.Message",
    "django_zqueue.queue.JobInfo",
    "django_zqueue.queue.ScanResult",
    "django_zqueue.tasks.task.task",
    "django_zqueue.tasks.task.Task",
    "django_zqueue.tasks.job.Job",
    "django_zqueue.worker.current_job",
    "django_zqueue.worker.JobContext",
    "django_zqueue.worker.JobTimeout",
    "django_zqueue.worker.Worker",
    "django_zqueue.tasks.schedules.Schedule",
    "django_zqueue.tasks.schedules.periodic",
    "django_zqueue.tasks.schedules.Scheduler",
    "django_zqueue.backends.ZQueueBackend",
    "django_zqueue.backends.task_rank",
    "django_zqueue.exceptions",
)


def _documented(path: str) -> bool:
    if any(part.startswith("_") for part in path.split(".")):
        return False
    return any(path == root or path.startswith(root + ".") for root in DOCUMENTED)


def _lookup(pkg: griffe.Module, path: str) -> str | None:
    """The final path of ``path`` in the package (aliases followed), or None."""
    parts = path.split(".")
    if parts[0] != pkg.name:
        return None
    obj: Any = pkg
    try:
        for part in parts[1:]:
            obj = obj.members[part]
        if isinstance(obj, griffe.Alias):
            obj = obj.final_target
    except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None
    return str(obj.path)


def _resolve(pkg: griffe.Module, scope: Any, target: str) -> str | None:
    """Resolve ``target`` as Sphinx would: absolute, then from ``scope`` outwards."""
    found = _lookup(pkg, target)
    while found is None and scope is not None:
        found = _lookup(pkg, f"{scope.path}.{target}")
        scope = scope.parent
    return found


class SphinxRoles(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        self._walk(pkg, pkg, set())

    # the name of the same hook in Griffe 1.x (the rewrite is idempotent)
    on_package_loaded = on_package

    def _walk(self, pkg: griffe.Module, obj: Any, seen: set[str]) -> None:
        if obj.path in seen or isinstance(obj, griffe.Alias):
            return
        seen.add(obj.path)
        if obj.docstring is None and obj.is_attribute and obj.parent.is_class:
            comment = re.search(r"\s#\s*(.+)$", obj.lines[-1] if obj.lines else "")
            if comment and not comment.group(1).startswith(("type:", "noqa")):
                obj.docstring = griffe.Docstring(comment.group(1).rstrip(), parent=obj)
        if obj.docstring is not None:
            obj.docstring.value = self._rewrite(pkg, obj, obj.docstring.value)
        for member in obj.members.values():
            self._walk(pkg, member, seen)

    def _rewrite(self, pkg: griffe.Module, obj: Any, text: str) -> str:
        # names are looked up from the object's own scope: a method's siblings first
        scope = obj if obj.is_class or obj.is_module else obj.parent

        def role(match: re.Match[str]) -> str:
            short, target = match.group(1), match.group(2)
            label = target.rsplit(".", 1)[-1] if short else target
            path = _resolve(pkg, scope, target)
            if path is not None and _documented(path):
                return f"[`{label}`][{path}]"
            return f"`{label}`"

        text = ROLE.sub(role, text)
        text = re.sub(r"(?m)^[ \t]*::[ \t]*$", "", text)
        return re.sub(r"(?m)(\S)::[ \t]*$", r"\1:", text)
