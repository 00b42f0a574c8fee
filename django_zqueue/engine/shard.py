"""A shard: the keys and script calls of one hash tag, as the engine builds them.

An unpartitioned queue is one shard, ``{prefix:queue}``; a queue with ``partitions: N``
is N shards, ``{prefix:queue#i}``. Every script call touches one shard's keys only (one
Redis Cluster slot). A :class:`Shard` is the engine's typed call builder for one hash
tag: each method is the :class:`~django_zqueue.scripts.Scripts` builder of the same name
with the shard's keys and the queue's :class:`~django_zqueue.scripts.Policy` filled in.
The :class:`~django_zqueue.engine.Engine` owns the shards, decides which one a job goes
to, and sends the calls; :class:`~django_zqueue.queue.Queue` validates input.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..keys import QueueKeys
from ..links import FlowJob, Resolution, Resolved
from ..records import Ack, Claimed, JobInfo, Message, NackResult, NewJob, ScanResult
from ..replies import AckManyCode, CancelReply, DeleteReply, MoveReply, RequeueReply
from ..scripts import Call, Policy, Scripts, SearchStep, Standing


class Shard:
    """One hash tag of a queue: ``index`` in the queue's shards, its ``keys``."""

    __slots__ = ("index", "keys", "policy", "queue", "scripts")

    def __init__(
        self, queue: str, index: int, keys: QueueKeys, scripts: Scripts, policy: Policy
    ) -> None:
        self.queue = queue
        self.index = index
        self.keys = keys
        self.scripts = scripts
        self.policy = policy

    def __repr__(self) -> str:
        return f"<Shard {self.keys.tag}>"

    # ---------------------------------------------------------------- write side

    def publish(self, jobs: Sequence[NewJob]) -> Call[list[tuple[str, str]]]:
        return self.scripts.publish(self.keys, self.policy, jobs)

    def publish_once(self, job: NewJob) -> Call[tuple[str, str]]:
        return self.scripts.publish_once(self.keys, self.policy, job)

    def claim(self, batch: int, consumer: str) -> Call[Claimed]:
        return self.scripts.claim(self.keys, self.policy, self.queue, batch, consumer)

    def ack(
        self, msg: Message, result: str, result_ttl_ms: int, run_ms: int | None, passed: str = ""
    ) -> Call[bool]:
        return self.scripts.ack(self.keys, self.policy, msg, result, result_ttl_ms, run_ms, passed)

    def ack_many(self, acks: Sequence[Ack]) -> Call[list[AckManyCode]]:
        return self.scripts.ack_many(self.keys, self.policy, acks)

    def nack(self, msg: Message, error: str, retry_ms: int, bury: bool) -> Call[NackResult]:
        return self.scripts.nack(self.keys, self.policy, msg, error, retry_ms, bury)

    def release(self, msg: Message) -> Call[bool]:
        return self.scripts.release(self.keys, self.policy, msg)

    def touch(self, msg: Message, extend_ms: int, progress: str) -> Call[int | None]:
        return self.scripts.touch(self.keys, self.policy, msg, extend_ms, progress)

    def scan(self, limit: int) -> Call[ScanResult]:
        return self.scripts.scan(self.keys, self.policy, limit)

    def delete(self, tag: str, waiting_only: bool) -> Call[DeleteReply]:
        return self.scripts.delete(self.keys, tag, waiting_only)

    def cancel(self, tag: str, ttl_ms: int) -> Call[CancelReply]:
        return self.scripts.cancel(self.keys, self.policy, tag, ttl_ms)

    def run_now(self, tag: str, below: float | None) -> Call[MoveReply]:
        return self.scripts.run_now(self.keys, self.policy, tag, below)

    def set_priority(self, tag: str, priority: int) -> Call[MoveReply]:
        return self.scripts.set_priority(self.keys, self.policy, tag, priority)

    def requeue_dead(self, tag: str) -> Call[RequeueReply]:
        return self.scripts.requeue_dead(self.keys, self.policy, tag)

    def purge_dead(self, limit: int) -> Call[int]:
        return self.scripts.purge_dead(self.keys, limit)

    def fire(
        self,
        name: str,
        expected_tick: int,
        next_tick: int | None,
        job: NewJob | None,
        digest: str | None = None,
    ) -> Call[bool]:
        return self.scripts.fire(
            self.keys, self.policy, name, expected_tick, next_tick, job, digest
        )

    # ---------------------------------------------------------------- read side

    def info(self, tag: str, with_body: bool = True) -> Call[JobInfo | None]:
        return self.scripts.info(self.keys, self.queue, tag, with_body)

    def state(self, tag: str) -> Call[str | None]:
        return self.scripts.state(self.keys, tag)

    def positions(self, tags: Sequence[str]) -> Call[list[Standing]]:
        return self.scripts.positions(self.keys, tags)

    # ---------------------------------------------------------------- workflows

    def search(
        self, set_name: str, needle: bytes, after: tuple[str, str] | None, steps: int, limit: int
    ) -> Call[SearchStep]:
        """One step of a search of this shard's sorted set ``set_name`` (``ready``,
        ``delayed``, ``leased``, ``dead``, ``wait``): ``search.lua``."""
        key = getattr(self.keys, set_name)
        return self.scripts.search(self.keys, key, needle, after, steps, limit)

    def wf_publish(self, jobs: Sequence[FlowJob]) -> Call[list[tuple[str, str]]]:
        return self.scripts.wf_publish(self.keys, self.policy, jobs)

    def group_check(self, adds: Sequence[tuple[str, int]]) -> Call[int]:
        return self.scripts.group_check(self.keys, self.policy, adds)

    def wf_link(self, parent: str, kid: str, most: int) -> Call[str]:
        return self.scripts.wf_link(self.keys, parent, kid, most)

    def wf_resolve(self, entries: Sequence[Resolution]) -> Call[Resolved]:
        return self.scripts.wf_resolve(self.keys, self.policy, entries)

    def wf_clear(self, tag: str, seen: bytes) -> Call[bool]:
        return self.scripts.wf_clear(self.keys, self.policy, tag, seen)
