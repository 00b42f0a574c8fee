"""Chains, groups and chords of task calls (docs/workflows.md).

::

    from django_zqueue import chain, group, chord

    chain(fetch.s(url), parse.s(), store.s()).enqueue()   # each gets the previous result
    group(resize.s(i) for i in ids).enqueue()             # parallel; .results() in order
    chord((resize.s(i) for i in ids), notify.s()).enqueue()  # notify([r1, r2, ...]) once

A signature (``task.s(...)``) becomes one job. Links between jobs are written with the
jobs (``wf_publish.lua``); a job that waits for parents has status ``"waiting"`` and enters
the line exactly once, when its last parent has succeeded. Results pass from parent to
dependent through the dependent's links in Redis (JSON, at most
``links.MAX_PASSED_BYTES`` each), not through an expiring result store. Inside
``transaction.atomic`` the whole workflow is published when the transaction commits
(and never on rollback).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from . import conf, oncommit
from .exceptions import InvalidArgument, ZQueueError
from .job import poll
from .links import MAX_LINKS, FlowJob, Kid, Ref
from .queue import NewJob, publish_flow
from .task import Job, Signature

log = logging.getLogger("django_zqueue.workflow")

__all__ = ["Workflow", "chain", "chord", "group"]


@dataclass(frozen=True)
class Workflow:
    """A handle on an enqueued chain, group or chord: ``jobs`` in the order given (a
    chord's callback last), and ``final``: the jobs whose results are the workflow's
    (a chain's last job, a group's members, a chord's callback)."""

    jobs: tuple[Job, ...]
    final: tuple[Job, ...]

    @property
    def ids(self) -> list[str]:
        return [j.id for j in self.jobs]

    def statuses(self) -> list[str]:
        """Each job's :meth:`Job.status`, in order (one round trip per job)."""
        return [j.status() for j in self.jobs]

    def results(self) -> list[Any]:
        """The results of the final jobs, in order; ``LookupError`` while one has not
        finished (or its result expired)."""
        return [j.result() for j in self.final]

    def result(self) -> Any:
        """The result of the last final job (a chain's end, a chord's callback)."""
        return self.final[-1].result()

    def wait(self, timeout: float = 10.0, interval: float = 0.05) -> list[Any]:
        """Poll until every final job has finished (for scripts and tests); their results."""
        return poll(self.results, timeout, interval)


class _Plan:
    """Jobs of a workflow being built: each signature's job, its parents and dependents."""

    def __init__(self) -> None:
        self.sigs: list[Signature] = []
        self.flows: list[dict[str, Any]] = []
        self.jobs: list[NewJob] = []
        self.parents: list[list[Ref]] = []
        self.kids: list[list[Kid]] = []

    def add(self, sig: Signature, flow: dict[str, Any]) -> int:
        self.sigs.append(sig)
        self.flows.append(flow)
        self.parents.append([])
        self.kids.append([])
        return len(self.sigs) - 1

    def link(self, parent: int, child: int) -> None:
        self.parents[child].append(self.ref(parent))
        place = len(self.parents[child])
        self.kids[parent].append(Kid(self.sigs[child].task.queue_name, self.tag(child), place))

    def prepare(self) -> None:
        self.jobs = [
            s.task.prepare_call(s.args, s.kwargs, f)
            for s, f in zip(self.sigs, self.flows, strict=True)
        ]

    def tag(self, i: int) -> str:
        return self.jobs[i].tag

    def ref(self, i: int) -> Ref:
        return Ref(self.sigs[i].task.queue_name, self.tag(i))

    def handle(self, final: Sequence[int]) -> Workflow:
        jobs = tuple(
            Job(self.tag(i), s.task.queue_name, s.task.name) for i, s in enumerate(self.sigs)
        )
        return Workflow(jobs, tuple(jobs[i] for i in final))

    def send(self, final: Sequence[int]) -> Workflow:
        """Publish every job (on commit inside ``transaction.atomic``); the handle."""
        parts = [
            (
                s.task.queue,
                FlowJob(self.jobs[i], tuple(self.parents[i]), tuple(self.kids[i])),
            )
            for i, s in enumerate(self.sigs)
        ]
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
                        self.tag(0),
                        len(parts),
                        json.dumps(f"{type(exc).__name__}: {exc}"),
                        exc_info=not isinstance(exc, ZQueueError),
                    )

            # at its place among the transaction's other jobs (oncommit.py), by its own calls
            jobs = [fj.job for _, fj in parts]
            deferred = oncommit.Deferred(first.queue, jobs, first.name, alone=publish)
            oncommit.defer(first.using_db, deferred)
        else:
            publish_flow(parts)
        return self.handle(final)


def _signatures(items: Iterable[Signature], what: str, least: int = 1) -> list[Signature]:
    sigs = list(items)
    for s in sigs:
        if not isinstance(s, Signature):
            raise InvalidArgument(f"a {what} takes signatures (task.s(...)), got {s!r}")
    if not least <= len(sigs) <= MAX_LINKS:
        raise InvalidArgument(f"{what} takes {least}..{MAX_LINKS} signatures, got {len(sigs)}")
    return sigs


@dataclass(frozen=True)
class chain:  # named as in Celery's canvas, which it replaces
    """Jobs run one after another; each (unless ``.si()``) gets the previous job's return
    value as its first argument. If one ends dead, the rest end dead with
    ``dependency <tag> failed`` (requeueing it revives them)."""

    sigs: tuple[Signature, ...]

    def __init__(self, *sigs: Signature) -> None:
        object.__setattr__(self, "sigs", tuple(_signatures(sigs, "chain")))

    def enqueue(self) -> Workflow:
        plan = _Plan()
        n = len(self.sigs)
        for i, s in enumerate(self.sigs):
            flow: dict[str, Any] = {}
            if i > 0 and not s.immutable:
                flow["in"] = "one"
            if i + 1 < n and not self.sigs[i + 1].immutable:
                flow["out"] = 1
            if i + 1 == n:
                flow["keep"] = 1
            plan.add(s, flow)
        plan.prepare()
        for i in range(1, n):
            plan.link(i - 1, i)
        return plan.send([n - 1])


@dataclass(frozen=True)
class group:
    """Jobs run in parallel; the handle's ``results()`` are in the order given."""

    sigs: tuple[Signature, ...]

    def __init__(self, sigs: Iterable[Signature]) -> None:
        object.__setattr__(self, "sigs", tuple(_signatures(sigs, "group")))

    def enqueue(self) -> Workflow:
        plan = _Plan()
        for s in self.sigs:
            plan.add(s, {"keep": 1})
        plan.prepare()
        return plan.send(range(len(self.sigs)))


@dataclass(frozen=True)
class chord:
    """A group, then ``callback`` once every member has succeeded, with the list of
    their results (in the order given) as its first argument (unless ``.si()``). It
    fires exactly once; if a member ends dead, the callback ends dead with
    ``dependency <tag> failed`` (requeueing the member revives it)."""

    header: tuple[Signature, ...]
    callback: Signature

    def __init__(self, header: Iterable[Signature], callback: Signature) -> None:
        object.__setattr__(self, "header", tuple(_signatures(header, "chord")))
        object.__setattr__(self, "callback", _signatures([callback], "chord callback")[0])

    def enqueue(self) -> Workflow:
        plan = _Plan()
        out = {} if self.callback.immutable else {"out": 1}
        for s in self.header:
            plan.add(s, dict(out))
        last = plan.add(self.callback, {"keep": 1} if out == {} else {"in": "list", "keep": 1})
        plan.prepare()
        for i in range(last):
            plan.link(i, last)
        return plan.send([last])
