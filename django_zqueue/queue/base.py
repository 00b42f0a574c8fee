"""The base of :class:`~django_zqueue.queue.Queue`: its name, options and engine."""

from __future__ import annotations

from .. import conf
from ..engine import Engine
from ..engine.redis.connection import RedisClient


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
        client: RedisClient | None = None,
    ) -> None:
        #: everything between this queue and Redis
        self.engine = e = Engine(name, options, prefix=prefix, client=client)
        self.name = name
        self.options = e.options
        self.prefix = prefix
        #: number of partitions (hash tags) the queue's jobs are spread over
        self.partitions = e.partitions

    def __repr__(self) -> str:
        if self.partitions > 1:
            return f"<Queue {self.name!r} keys={self.engine.tag} partitions={self.partitions}>"
        return f"<Queue {self.name!r} keys={self.engine.tag}>"

    @property
    def visibility_timeout_ms(self) -> int:
        """The queue's lease length (a job may have its own)."""
        return self.engine.policy.visibility_ms
