"""The jobs of a workflow being built (:mod:`django_zqueue.tasks.workflows`): one job per
signature, the links between them, and their publication (all of it, on commit inside
``transaction.atomic``).

A canvas compiles into a :class:`Plan` step by step: each step is given its
:class:`Inputs` (the jobs it waits for, and whether their results come as one value or
as a list) and returns its outputs in the same form, so canvases nest: a chain of groups,
a group of chains, a chord whose header holds chains (docs/workflows.md, "Nesting").
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any, NamedTuple

from django.db import transaction

from ... import conf
from ...engine.records.links import MAX_LINKS, FlowJob, Kid, Ref
from ...exceptions import InvalidArgument, ZQueueError
from ...queue import NewJob, Queue, publish_flow
from .. import oncommit
from ..task import Job, Signature

log = logging.getLogger("django_zqueue.workflow")

#: most links (parent -> dependent) one workflow may have: a batch of 10,000 with both
#: callbacks
MAX_EDGES = 2 * MAX_LINKS
#: most jobs one workflow may have
MAX_JOBS = 2 * MAX_LINKS + 2


class Inputs(NamedTuple):
    """What a step of a canvas waits for: ``jobs`` (indexes in the plan), whose results
    it gets as one value (``many`` False: at most one job) or as a list in that order."""

    jobs: tuple[int, ...] = ()
    many: bool = False


class Plan:
    """Jobs of a workflow being built: each signature's job, how it takes part (its
    ``flow``: ``in``, ``out``, ``keep``) and the links, in the order they were made."""

    def __init__(self) -> None:
        self.sigs: list[Signature] = []
        self.flows: list[dict[str, Any]] = []
        self.edges: list[tuple[int, int]] = []
        self.any_end: set[int] = set()  # jobs that take any end of every parent

    def add(self, sig: Signature, flow: dict[str, Any]) -> int:
        if len(self.sigs) >= MAX_JOBS:
            raise InvalidArgument(f"a workflow has at most {MAX_JOBS} jobs: this one has more")
        self.sigs.append(sig)
        self.flows.append(flow)
        return len(self.sigs) - 1

    def edge(self, parent: int, child: int) -> None:
        """``child`` waits for ``parent`` (its next place among ``child``'s parents)."""
        if len(self.edges) >= MAX_EDGES:
            raise InvalidArgument(
                f"a workflow has at most {MAX_EDGES} links between its jobs: this one has more"
            )
        self.edges.append((parent, child))

    def call(self, sig: Signature, inputs: Inputs) -> int:
        """The job of ``sig``, waiting for ``inputs`` and (unless ``.si()``) getting their
        result first in its arguments: the one value, or the list of them."""
        flow: dict[str, Any] = {}
        i = self.add(sig, flow)
        for p in inputs.jobs:
            self.edge(p, i)
        if inputs.jobs and not sig.immutable:
            flow["in"] = "list" if inputs.many else "one"
            for p in inputs.jobs:
                self.flows[p]["out"] = 1
        return i

    def send(self, final: Sequence[int]) -> tuple[Job, ...]:
        """Publish every job (on commit inside ``transaction.atomic``); their handles.
        ``final``: the jobs whose results are the workflow's (kept for ``result_ttl``)."""
        for i in final:
            self.flows[i]["keep"] = 1
        jobs = [
            s.task.prepare_call(s.args, s.kwargs, f)
            for s, f in zip(self.sigs, self.flows, strict=True)
        ]
        tags = [j.tag for j in jobs]
        parts = self._linked(jobs, tags)
        first = self.sigs[0].task
        on_commit = first.on_commit
        if on_commit is None:
            on_commit = conf.get_config().enqueue_on_commit
        if on_commit and transaction.get_connection(first.using_db).in_atomic_block:

            def publish() -> None:
                try:
                    publish_flow(parts)
                except Exception as exc:  # committed: say what was lost, in one line
                    log.error(
                        "event=publish_after_commit_failed workflow=%s jobs=%d error=%s",
                        tags[0],
                        len(parts),
                        json.dumps(f"{type(exc).__name__}: {exc}"),
                        exc_info=not isinstance(exc, ZQueueError),
                    )

            # at its place among the transaction's other jobs (oncommit.py), by its own calls
            deferred = oncommit.Deferred(first.queue, list(jobs), first.name, alone=publish)
            oncommit.defer(first.using_db, deferred)
        else:
            publish_flow(parts)
        return tuple(Job(tags[i], s.task.queue_name, s.task.name) for i, s in enumerate(self.sigs))

    def _linked(self, jobs: Sequence[NewJob], tags: Sequence[str]) -> list[tuple[Queue, FlowJob]]:
        """Each job with its queue and its links: the parents it waits for, the children
        that wait for it, which of its parents are optional. Raises ``InvalidArgument``
        for a job with more than ``MAX_LINKS`` of either."""
        parents: list[list[Ref]] = [[] for _ in jobs]
        kids: list[list[Kid]] = [[] for _ in jobs]
        optional: list[list[int]] = [[] for _ in jobs]
        for p, c in self.edges:
            parents[c].append(Ref(self.sigs[p].task.queue_name, tags[p]))
            place = len(parents[c])
            kids[p].append(Kid(self.sigs[c].task.queue_name, tags[c], place))
            if self.sigs[p].optional:
                optional[c].append(place)
        for i, s in enumerate(self.sigs):
            if len(parents[i]) > MAX_LINKS or len(kids[i]) > MAX_LINKS:
                raise InvalidArgument(
                    f"a job of a workflow ({s.task.name}) waits for or is waited for by more "
                    f"than {MAX_LINKS} jobs"
                )
        return [
            (
                s.task.queue,
                FlowJob(
                    jobs[i],
                    tuple(parents[i]),
                    tuple(kids[i]),
                    tuple(optional[i]),
                    i in self.any_end,
                ),
            )
            for i, s in enumerate(self.sigs)
        ]
