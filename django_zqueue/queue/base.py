"""The base of :class:`~django_zqueue.queue.Queue`: its name, options and engine."""

from __future__ import annotations

import redis

from .. import conf
from ..engine import Engine
from ..engine.keys import QueueKeys


class QueueBase:
    """What every part of a queue shares (see :class:`~django_zqueue.queue.Queue`): its
    name, options and :class:`~django_zqueue.engine.Engine` (``engine``), which owns the
    client, the shards and the sending of script calls."""

    def __init__(
        self,
        name: str,
        options: conf.QueueOptions | None = None,
        *,
        prefix: str = "zq",
        client: redis.Redis | None = None,
    ) -> None:
        #: everything between this queue and Redis
        self.engine = e = Engine(name, options, prefix=prefix, client=client)
        self.name = name
        self.options = e.options
        self.prefix = prefix
        #: the queue's own hash tag: its jobs when unpartitioned; always its workers hash
        self.keys: QueueKeys = e.keys
        #: number of partitions (hash tags) the queue's jobs are spread over
        self.partitions = e.partitions
        #: the keys of the queue's periodic schedules (shard 0, with the cron jobs)
        self.sched_keys: QueueKeys = e.sched_keys
        #: the engine's client (``engine.client``), for code that reads the queue's keys by
        #: hand; no module of the package above the engine uses it (tests/test_layers.py)
        self.client: redis.Redis = e.client

    def __repr__(self) -> str:
        if self.partitions > 1:
            return f"<Queue {self.name!r} keys={self.keys.tag} partitions={self.partitions}>"
        return f"<Queue {self.name!r} keys={self.keys.tag}>"

    @property
    def visibility_timeout_ms(self) -> int:
        """The queue's lease length (a job may have its own)."""
        return self.engine.policy.visibility_ms
