"""Running a coroutine of an ``async def`` task to an end, within its timeout, and
recording a run's outcome on its OpenTelemetry span: shared by the event-loop lane
(:mod:`.aio`) and the thread lane's runner (:mod:`.runner`), which runs an async task on
a loop of its own when the worker has no lane."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any

from ..exceptions import JobTimeout
from ..tasks import registry, tracing
from ..tasks.task import Task
from .outcome import Failure, Outcome, ParkedRun, Released


def run_blocking(coro: Coroutine[Any, Any, Any], timeout: float | None) -> Any:
    """Run an async task's coroutine to its end in the calling thread (a worker without
    a lane), bounded by ``timeout`` seconds (JobTimeout)."""
    return asyncio.run(bounded(coro, timeout))


async def bounded(coro: Coroutine[Any, Any, Any], timeout: float | None) -> Any:
    """Await ``coro``; past ``timeout`` seconds (None: no limit) asyncio.timeout cancels
    it at its current await and JobTimeout is raised."""
    if timeout is None:
        return await coro
    cm = asyncio.timeout(timeout)
    try:
        async with cm:
            return await coro
    except TimeoutError as exc:
        if cm.expired():
            raise JobTimeout(f"ran past its timeout of {timeout}s") from exc
        raise


def span_ended(span: Any, outcome: Outcome) -> None:
    """Record ``outcome`` on the run's consumer span (:mod:`django_zqueue.tasks.tracing`)."""
    if span is None:
        return
    if isinstance(outcome, Failure):
        msg = outcome.context.message
        retry = not outcome.dead and msg.attempt <= msg.max_retries
        tracing.ended(span, error=outcome.error, exception=outcome.exception, retry=retry)
    elif isinstance(outcome, Released):  # not run: given back, no attempt used
        span.set_attribute("zqueue.outcome", "released")
    elif isinstance(outcome, ParkedRun):  # a durable sleep or wait: no attempt used
        span.set_attribute("zqueue.outcome", "parked")
    else:
        tracing.ended(span)


#: slots of the event-loop lane when ``zqueue_worker`` is given no ``--async-concurrency``
#: and an async task uses one of its queues
DEFAULT_ASYNC_CONCURRENCY = 100


def default_async_concurrency(queues: Sequence[str]) -> int:
    """``zqueue_worker``'s default: 100 slots when a registered ``async def`` task uses
    one of ``queues``, else 0 (no lane)."""
    tasks = registry.all_tasks().values()
    found = any(isinstance(t, Task) and t.is_async and t.queue_name in queues for t in tasks)
    return DEFAULT_ASYNC_CONCURRENCY if found else 0
