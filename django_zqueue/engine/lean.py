"""The common publish of one job, made once per task (``engine.writes.lean``).

Most enqueues are one call of a task with its default options: the same queue, the same
retries and priority, a body of a task's shape. :class:`LeanPublish` holds everything
such a publish sends but the job's tag and body, so an enqueue does not go through the
general path of ``Queue.prepare`` and ``Writes.publish`` (a spec per job, the cut into
script calls, the choice of script) to send the same ``publish_lean.lua`` call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..exceptions import DuplicateJob
from .layout import Layout
from .records.spec import JobSpec
from .scripts import lean_body

if TYPE_CHECKING:
    from .flow import Flow
    from .shard import Shard

__all__ = ["LeanPublish"]


class LeanPublish:
    """``publish_lean.lua`` for the jobs of one spec in one queue: call it with a job's
    tag and encoded body. The call sends what ``Writes.publish`` would send for that job
    alone, and raises what it raises."""

    __slots__ = ("_engine", "_limit", "_max_retries", "_policy", "_priority", "_shard")

    def __init__(self, engine: Flow, shard: Shard, spec: JobSpec, limit: int) -> None:
        self._engine = engine
        self._shard = shard
        self._policy = shard.policy.packed_for("publish_lean")
        self._limit = limit
        self._max_retries, self._priority = spec.max_retries, spec.priority

    def __call__(self, tag: str, body: bytes) -> bool:
        """Publish the job ``tag`` of ``body`` (``encode_body``'s bytes, as
        ``Queue.prepare`` makes them). False, with nothing sent, for a body this script
        does not take (over the queue's ``max_payload_bytes``, or not of a task's shape):
        the general path takes that job (and raises ``PayloadTooLarge``).
        :class:`DuplicateJob` when ``tag`` is in use (nothing written)."""
        if len(body) > self._limit:
            return False
        texts = lean_body(body)
        if texts is None:
            return False
        e = self._engine
        Layout(e).ensure()
        args = (self._policy, tag, self._max_retries, self._priority, *texts)
        found = e.run(self._shard.publish_lean(args))
        if found:
            raise DuplicateJob([t for t, _ in found], [s for _, s in found])
        return True
