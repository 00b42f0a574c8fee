""":class:`ZQueueTest`: a test's own queues and the helpers a test uses on them
(docs/testing.md). The pytest fixture ``zqueue`` (:mod:`.plugin`) and
:class:`~.mixin.ZQueueTestMixin` each make one per test.

While started, ``settings.ZQUEUE`` points at the tests' Redis (:mod:`.server`) with a key
prefix of this test's own (``ZQUEUE_TEST_PREFIX`` too, so Django's test environment keeps
it: :mod:`django_zqueue.conf.testenv`); when stopped, every key of that prefix is deleted
and the settings are back as they were."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.test import override_settings

from .. import conf
from ..queue import Queue, get_queue
from .commits import flush
from .drain import DrainSummary, drain, one_pass, run_one
from .jobs import EnqueuedJob, live_jobs, matches, task_name
from .server import test_redis_url


class ZQueueTest:
    """A test's own queues (see the module's docstring): ``start()`` before the test,
    ``stop()`` after it; or ``with ZQueueTest() as zq:``."""

    def __init__(self, redis_url: str | None = None, prefix: str | None = None) -> None:
        self.redis_url = redis_url
        #: this test's key prefix
        self.prefix = prefix or f"test_zq-{uuid.uuid4().hex[:12]}"
        self._override: override_settings | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> ZQueueTest:
        url = self.redis_url or test_redis_url()
        self.redis_url = url
        raw: Any = getattr(settings, "ZQUEUE", None)
        base = dict(raw) if isinstance(raw, dict) else {}
        if base.get("REDIS_URL") != url:  # another server: of its own kind
            base.pop("CLUSTER", None)
        value = {**base, "REDIS_URL": url, "PREFIX": self.prefix}
        override = override_settings(ZQUEUE=value, ZQUEUE_TEST_PREFIX=self.prefix)
        override.enable()
        try:
            conf.get_config()  # invalid settings fail here, before the test
        except Exception:
            override.disable()
            raise
        self._override = override
        return self

    def stop(self, *, wipe: bool = True) -> None:
        """Delete every key of the test's prefix (``wipe``) and put the settings back."""
        if self._override is None:
            return
        try:
            if wipe:
                self.wipe()
        finally:
            self._override.disable()
            self._override = None
            conf.reset()

    def __enter__(self) -> ZQueueTest:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wipe(self) -> int:
        """Delete every key of this test's prefix (its jobs, schedules, results);
        returns how many were deleted."""
        return self.queue().engine.sandbox.wipe_prefix()

    # ------------------------------------------------------------------ the queues

    def queue_names(self) -> list[str]:
        """The configured queues' names."""
        return list(conf.get_config().queues)

    def queue(self, name: str | None = None) -> Queue:
        """A configured queue (None: the first configured one)."""
        return get_queue(name or self.queue_names()[0])

    def _names(self, queue: str | None) -> list[str]:
        if queue is None:
            return self.queue_names()
        self.queue(queue)  # an unknown name raises UnknownQueue
        return [queue]

    # ------------------------------------------------------------------ enqueued

    def enqueued(self, task: Any = None, *, queue: str | None = None) -> list[EnqueuedJob]:
        """The jobs not ended yet (ready, delayed, running) of ``task`` (a ``@task``, a
        Django Tasks task or a name; None: any) on ``queue`` (None: every configured
        queue), each with its task, args, kwargs, queue, state, priority, run-at."""
        flush()
        name = None if task is None else task_name(task)
        jobs = [j for q in self._names(queue) for j in live_jobs(self.queue(q))]
        return [j for j in jobs if name is None or j.task == name]

    def _matching(
        self, task: Any, args: Any, kwargs: Any, queue: str | None
    ) -> tuple[list[EnqueuedJob], list[EnqueuedJob]]:
        everything = self.enqueued(queue=queue)
        name = task_name(task)
        return [j for j in everything if matches(j, name, args, kwargs, None)], everything

    def assert_enqueued(
        self,
        task: Any,
        *,
        args: Any = None,
        kwargs: Any = None,
        queue: str | None = None,
        count: int | None = None,
    ) -> list[EnqueuedJob]:
        """Assert that ``task`` was enqueued (``count`` times exactly, if given) with
        ``args`` and ``kwargs`` (None: any) on ``queue`` (None: any); returns the jobs
        found. The failure message lists what *was* enqueued."""
        found, everything = self._matching(task, args, kwargs, queue)
        ok = len(found) == count if count is not None else bool(found)
        if not ok:
            want = _describe(task, args, kwargs, queue)
            times = f"{count} time(s)" if count is not None else "at least once"
            raise AssertionError(
                f"expected {want} enqueued {times}, found {len(found)}.\n" + _listing(everything)
            )
        return found

    def assert_not_enqueued(
        self, task: Any, *, args: Any = None, kwargs: Any = None, queue: str | None = None
    ) -> None:
        """Assert that no job of ``task`` with ``args`` and ``kwargs`` (None: any) waits
        on ``queue`` (None: any)."""
        found, everything = self._matching(task, args, kwargs, queue)
        if found:
            want = _describe(task, args, kwargs, queue)
            raise AssertionError(
                f"expected no {want} enqueued, found {len(found)}.\n" + _listing(everything)
            )

    @contextlib.contextmanager
    def expect_enqueued(
        self,
        task: Any,
        *,
        args: Any = None,
        kwargs: Any = None,
        queue: str | None = None,
        count: int | None = None,
    ) -> Iterator[list[EnqueuedJob]]:
        """Assert that the block enqueues ``task`` (as :meth:`assert_enqueued`, counting
        only the jobs the block added); the list yielded is filled with them on exit."""
        before = {j.id for j in self._matching(task, args, kwargs, queue)[0]}
        added: list[EnqueuedJob] = []
        yield added
        found, everything = self._matching(task, args, kwargs, queue)
        added.extend(j for j in found if j.id not in before)
        ok = len(added) == count if count is not None else bool(added)
        if not ok:
            want = _describe(task, args, kwargs, queue)
            times = f"{count} time(s)" if count is not None else "at least once"
            raise AssertionError(
                f"expected the block to enqueue {want} {times}, it enqueued {len(added)}.\n"
                + _listing(everything)
            )

    # ------------------------------------------------------------------ running

    def drain(
        self,
        queue: str | None = None,
        *,
        delayed: bool = True,
        recursive: bool = True,
        raise_errors: bool = True,
        max_jobs: int = 10_000,
        timeout: float = 60.0,
        time_limits: bool = False,
    ) -> DrainSummary:
        """Run every waiting job of ``queue`` (None: every configured queue) in this
        process, through the worker's own path, until none is left; returns what ran
        (:class:`~.drain.DrainSummary`). ``delayed``: delayed jobs, retries and durable
        sleeps run at once. ``recursive=False``: one pass, the jobs the pass enqueues
        are left waiting. ``raise_errors``: the first exception a task raises is raised
        here, with its own traceback; False: failures go where production sends them
        (a retry, the dead letters). ``time_limits``: a task past its ``timeout`` is
        interrupted (``JobTimeout``), as by a worker's heartbeat (off: no heartbeat)."""
        names = self._names(queue)
        flush()
        if recursive:
            return drain(
                names,
                before_pass=flush,
                delayed=delayed,
                raise_errors=raise_errors,
                max_jobs=max_jobs,
                timeout=timeout,
                time_limits=time_limits,
            )
        moved = sum(self.queue(n).engine.sandbox.fast_forward() for n in names) if delayed else 0
        waiting = moved + sum(self.queue(name).counts()["ready"] for name in names)
        total = DrainSummary()
        if waiting:
            deadline = time.monotonic() + timeout
            one_pass(names, raise_errors, min(waiting, max_jobs), deadline, total, time_limits)
        return total

    def run(
        self,
        job: Any,
        *,
        queue: str | None = None,
        raise_errors: bool = True,
        time_limits: bool = False,
    ) -> DrainSummary:
        """Run one job now (a ``Job``, an :class:`EnqueuedJob` or a job id with
        ``queue``), through the worker's own path."""
        tag, name = _job_ref(job, queue)
        flush()
        return run_one(self.queue(name), tag, raise_errors, time_limits)

    def signal(self, job: Any, name: str, payload: Any = None, *, queue: str | None = None) -> bool:
        """Deliver durable event ``name`` with ``payload`` to ``job`` (see
        ``Queue.signal``); a ``drain()`` then runs it on."""
        tag, qname = _job_ref(job, queue)
        return self.queue(qname).signal(tag, name, payload)


def _job_ref(job: Any, queue: str | None) -> tuple[str, str | None]:
    if isinstance(job, str):
        return job, queue
    tag = getattr(job, "id", None)
    if not isinstance(tag, str):
        raise TypeError(f"expected a Job, an EnqueuedJob or a job id, got {job!r}")
    name = getattr(job, "queue_name", None) or getattr(job, "queue", None)
    return tag, queue or (name if isinstance(name, str) else None)


def _describe(task: Any, args: Any, kwargs: Any, queue: str | None) -> str:
    parts = [task_name(task)]
    if args is not None:
        parts.append(f"args={list(args)!r}")
    if kwargs is not None:
        parts.append(f"kwargs={kwargs!r}")
    if queue is not None:
        parts.append(f"queue={queue!r}")
    return " ".join(parts)


def _listing(jobs: list[EnqueuedJob]) -> str:
    if not jobs:
        return "Nothing is enqueued."
    shown = "\n".join(f"  {j}" for j in jobs[:50])
    more = f"\n  ... and {len(jobs) - 50} more" if len(jobs) > 50 else ""
    return f"Enqueued ({len(jobs)}):\n{shown}{more}"
