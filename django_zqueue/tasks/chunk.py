"""Chunk tasks: a handler called with many jobs' items at once (docs/workflows.md).

::

    @task(queue="emails", chunk=Chunk(size=100, wait=2.0))
    def send_welcome(user_ids: list[int]) -> None:
        mailer.send_many(User.objects.filter(pk__in=user_ids))

    send_welcome.enqueue(user.pk)  # one job per item, each with its own tag and rank

A worker holds the jobs of a chunk task it claims until ``size`` are held or the oldest
has waited ``wait`` seconds since it was enqueued, then calls the handler once with
their items, in claim order. Each job keeps its own result (the handler returns a list,
one result per item, or None), its retries (``ChunkFailed`` names the items that failed:
only those retry) and its cancel.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..exceptions import InvalidArgument

if TYPE_CHECKING:
    from .context import JobContext

__all__ = ["MAX_CHUNK", "Chunk", "ChunkFailed", "check_chunk", "check_item", "current_chunk"]

#: the most items one handler call gets
MAX_CHUNK = 1000
#: the longest a chunk may wait to fill, in seconds
MAX_CHUNK_WAIT = 3600.0

_members: ContextVar[list[JobContext] | None] = ContextVar("zqueue_current_chunk", default=None)


@dataclass(frozen=True, slots=True)
class Chunk:
    """How a chunk task's jobs are gathered: up to ``size`` items per call, called once
    ``size`` are held or the oldest has waited ``wait`` seconds."""

    size: int
    wait: float = 1.0

    def __post_init__(self) -> None:
        size, wait = self.size, self.wait
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_CHUNK:
            raise InvalidArgument(f"Chunk size must be an int in [1, {MAX_CHUNK}], got {size!r}")
        if (
            isinstance(wait, bool)
            or not isinstance(wait, int | float)
            or not math.isfinite(wait)
            or not 0 < wait <= MAX_CHUNK_WAIT
        ):
            raise InvalidArgument(
                f"Chunk wait must be seconds in (0, {MAX_CHUNK_WAIT:g}], got {wait!r}"
            )


class ChunkFailed(Exception):
    """Raised by a chunk handler whose items did not all succeed: ``failures`` maps each
    failed item, by its index in the list the handler got or by its job's tag, to its
    exception. Those jobs fail (and retry under the task's rules); the others succeed,
    with ``results`` (one per item, in order; None: no result kept)."""

    def __init__(
        self,
        failures: Mapping[int | str, BaseException],
        results: list[Any] | None = None,
    ) -> None:
        if not failures:
            raise InvalidArgument("ChunkFailed needs at least one failed item")
        super().__init__(f"{len(failures)} item(s) of the chunk failed")
        self.failures = dict(failures)
        self.results = results


def current_chunk() -> list[JobContext] | None:
    """The jobs of the chunk the running handler was called with, in the order of its
    items (None outside a chunk handler): their tags, attempts, progress."""
    return _members.get()


def set_current_chunk(members: list[JobContext] | None) -> None:
    """Set by the worker around a chunk handler's call."""
    _members.set(members)


def check_chunk(name: str, f: Callable[..., Any], opts: Mapping[str, Any], cron: Any) -> None:
    """A chunk task's options: a :class:`Chunk`, a sync function, run in a thread, no
    cron (a tick has no item)."""
    chunk = opts.get("chunk")
    if chunk is None:
        return
    why = (
        "chunk must be a Chunk(size=..., wait=...)"
        if not isinstance(chunk, Chunk)
        else "a chunk task cannot be an async def function"
        if inspect.iscoroutinefunction(f)
        else "a chunk task cannot run with isolation='process'"
        if opts.get("isolation") == "process"
        else "a chunk task cannot have a cron (a tick has no item)"
        if cron is not None
        else None
    )
    if why:
        raise InvalidArgument(f"task {name!r}: {why}")


def check_item(
    name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any], index: int | None
) -> None:
    """A job of chunk task ``name`` is one item: one positional argument."""
    if len(args) != 1 or kwargs:
        where = "" if index is None else f" (call {index})"
        raise TypeError(f"{name} is a chunk task: each job is one item, enqueue(item){where}")
