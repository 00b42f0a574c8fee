"""ZQueueBackend plus a burst worker run between enqueue and the test's assertions."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from django_zqueue.backends import ZQueueBackend
from django_zqueue.worker import Worker


class ConformanceBackend(ZQueueBackend):
    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        result = super().enqueue(task, args, kwargs)
        deferred = task.run_after is not None and task.run_after > timezone.now()
        waiting = self.enqueue_on_commit and transaction.get_connection().in_atomic_block
        if deferred or waiting:
            return result
        Worker([task.queue_name], burst=True, scanner=False).run()
        return self.get_result(result.id)

    def clear(self) -> None:
        """DummyBackend's test hook (TaskTestCase.setUp calls it): empty every queue of
        the conformance run's own key prefix."""
        from django_zqueue import conf, get_queue

        for name in conf.get_config().queues:
            get_queue(name).clear()
