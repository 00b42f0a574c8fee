"""The engine's workflow verbs (``engine.flow_publish``, docs/workflows.md): publishing a
workflow's jobs (one waiting job, or a step of a workflow over several queues of the
same Redis, in one pipeline), the checks before it (tags free, room in each shard), the
undoing of a job written by a step that failed, the dispatch of ends and the size of the
outbox. The links and the dispatch themselves are :mod:`.flow`'s (the ``Flow`` part of
the engine); :mod:`django_zqueue.queue.flow` checks the input and asks these verbs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..conf.bounds import PUBLISH_WINDOW
from ..exceptions import DuplicateJob
from .flow import Workflows
from .layout import Layout
from .records.links import FlowJob, Ref
from .redis.connection import unavailable_as_error
from .scripts import Call
from .writes import group_room_or_full, room_or_full

if TYPE_CHECKING:
    from .flow import Flow


#: one ``wf_publish`` call of a step
Step = Call[list[tuple[str, str]]]


class FlowPublish:
    """The workflow verbs of one queue's engine (``engine.flow_publish``). A verb over jobs
    of several queues takes the ``FlowPublish`` of each (their queues must share this
    engine's Redis: they go in one pipeline). Connection errors become
    ``QueueUnavailable``."""

    __slots__ = ("_engine", "_flow")

    def __init__(self, engine: Flow) -> None:
        self._engine = engine
        self._flow = Workflows(engine)

    @property
    def name(self) -> str:
        """The queue's name."""
        return self._engine.name

    # ---------------------------------------------------------------- publishing

    def publish_waiting(self, job: FlowJob) -> list[tuple[str, str]]:
        """Publish one job that waits for its parents (one ``wf_publish`` call): the
        (tag, state) of a clash (nothing written), else []. Link it with
        :meth:`link_parents` next."""
        e = self._engine
        Layout(e).ensure()
        return e.run(e._shard_for(job.job.tag).wf_publish([job]))

    def link_parents(self, tag: str, parents: Sequence[Ref]) -> None:
        """Register waiting job ``tag`` with each parent, in one round trip; parents
        already finished or dead are applied at once."""
        self._flow.link_parents(tag, parents)

    def publish_step(
        self, groups: Sequence[tuple[FlowPublish, Sequence[FlowJob]]], written: list[Ref]
    ) -> None:
        """Publish jobs of several queues (``groups``: each queue's ``FlowPublish`` and
        jobs; ``wf_publish`` calls per shard, cut by ``engine.flow.cut_calls``) in one
        round trip per ``PUBLISH_WINDOW`` calls. Adds to ``written`` the jobs of each call
        that wrote its jobs (a call refused on a clash or a full queue wrote nothing),
        then raises the first failed call's error, or DuplicateJob naming every clash of
        its round trip (the round trips after it are not sent)."""
        calls = [
            (w.name, call, tags) for w, jobs in groups for call, tags in w._flow.flow_calls(jobs)
        ]
        for i in range(0, len(calls), PUBLISH_WINDOW):  # a failed round trip stops here
            self._send_step(calls[i : i + PUBLISH_WINDOW], written)

    def _send_step(self, calls: Sequence[tuple[str, Step, list[str]]], written: list[Ref]) -> None:
        """One round trip of :meth:`publish_step`: ``written`` gets the jobs of each call
        that wrote them; then the first failed call's error, or DuplicateJob."""
        batch = self._engine.batch()
        pending = [batch.add(call) for _, call, _ in calls]
        self._engine.send(batch)
        clashes: list[tuple[str, str]] = []
        for (name, _, tags), p in zip(calls, pending, strict=True):
            if p.failed is None and not p.result():
                written.extend(Ref(name, t) for t in tags)
        for p in pending:
            clashes.extend(p.result())  # the first failed call raises
        if clashes:
            raise DuplicateJob([t for t, _ in clashes], [s for _, s in clashes])

    def remove(self, tag: str) -> None:
        """Delete job ``tag`` whatever its state (undoing a step of a workflow that
        failed): one ``delete`` call."""
        e = self._engine
        e.run(e._shard_for(tag).delete(tag, False))

    # ---------------------------------------------------------------- checks

    def taken(self, jobs: Sequence[tuple[FlowPublish, str]]) -> list[tuple[int, str]]:
        """The jobs of ``jobs`` (each queue's ``FlowPublish`` and a tag) whose tag is
        taken, as (index in ``jobs``, state; '' when it has none): one round trip, and
        one more only when a tag is taken."""
        e = self._engine
        with unavailable_as_error():
            pipe = e._client.pipeline(transaction=False)
            for w, tag in jobs:
                pipe.hexists(w._engine._keys_for(tag).meta, tag)
            found = [i for i, t in enumerate(pipe.execute()) if t]
        if not found:
            return []
        calls = [jobs[i][0]._engine._shard_for(jobs[i][1]).state(jobs[i][1]) for i in found]
        states = e.run_all(calls)
        return [(i, s or "") for i, s in zip(found, states, strict=True)]

    def check_room(self, jobs: Sequence[tuple[FlowPublish, str, str]]) -> None:
        """QueueFull (nothing written) when jobs that enter a line now (each queue's
        ``FlowPublish``, the tag, the group key or '') do not fit in their shard's
        ``max_length`` (one round trip, only for queues with a limit) or their group's
        ``group_max_length`` (one read-only ``group_check`` per shard, in one round trip,
        only for fair queues with the limit)."""
        shards = [(w._engine._shard_for(tag), group) for w, tag, group in jobs]
        room_or_full([(shard, 1) for shard, _ in shards], self._engine)
        group_room_or_full([(shard, group, 1) for shard, group in shards], self._engine)

    # ---------------------------------------------------------------- ends

    def dispatch(self, tags: Sequence[str]) -> int:
        """Apply the outbox entries of jobs ``tags`` to their dependents (see
        :meth:`.flow.Flow.dispatch`); the entries applied."""
        return self._flow.dispatch(tags)

    def outbox_size(self) -> int:
        """Entries waiting for dispatch (all shards): one round trip."""
        e = self._engine
        with unavailable_as_error():
            pipe = e._client.pipeline(transaction=False)
            for s in e._shards:
                pipe.zcard(s.keys.wf_out)
            return sum(int(n) for n in pipe.execute())
