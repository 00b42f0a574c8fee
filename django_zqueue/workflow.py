"""Chains, groups and chords of task calls (docs/workflows.md).

::

    from django_zqueue import chain, group, chord

    chain(fetch.s(url), parse.s(), store.s()).enqueue()   # each gets the previous result
    group(resize.s(i) for i in ids).enqueue()             # parallel; .results() in order
    chord((resize.s(i) for i in ids), notify.s()).enqueue()  # notify([r1, r2, ...]) once
    batch((resize.s(i) for i in ids), on_complete=report.s()).enqueue()  # report(summary)
    chain(fetch.s(url), optional(parse.s()), store.s())  # store(None) if parse fails

A signature (``task.s(...)``) becomes one job. Links between jobs are written with the
jobs (``wf_publish.lua``); a job that waits for parents has status ``"waiting"`` and enters
the line exactly once, when its last parent has succeeded. Results pass from parent to
dependent through the dependent's links in Redis (JSON, at most
``links.MAX_PASSED_BYTES`` each), not through an expiring result store. Inside
``transaction.atomic`` the whole workflow is published when the transaction commits
(and never on rollback).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, overload

from django.db import transaction

from . import conf
from .exceptions import InvalidArgument, ZQueueError
from .job import poll
from .links import MAX_LINKS, FlowJob, Kid, OptionalParent, Ref
from .queue import NewJob, get_queue, publish_flow
from .task import Job, Signature

log = logging.getLogger("django_zqueue.workflow")

__all__ = ["Batch", "BatchProgress", "Workflow", "batch", "chain", "chord", "group", "optional"]


@overload
def optional(parent: Signature) -> Signature: ...


@overload
def optional(parent: Any) -> OptionalParent: ...


def optional(parent: Any) -> Signature | OptionalParent:
    """A parent whose failure does not stop its dependents: they run once it has ended,
    however it ended, with None in place of its result. ``optional(sig)`` in a chain or a
    chord's header; ``depends_on=[job_a, optional(job_b)]`` (a tag, ``(queue, tag)`` or
    ``Job``)."""
    if isinstance(parent, Signature):
        return dataclasses.replace(parent, optional=True)
    if isinstance(parent, OptionalParent):
        return parent
    return OptionalParent(parent)


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
        self.optional: list[list[int]] = []  # each job's places that take any end
        self.any_end: set[int] = set()  # jobs that take any end of every parent

    def add(self, sig: Signature, flow: dict[str, Any]) -> int:
        self.sigs.append(sig)
        self.flows.append(flow)
        self.parents.append([])
        self.kids.append([])
        self.optional.append([])
        return len(self.sigs) - 1

    def link(self, parent: int, child: int) -> None:
        self.parents[child].append(self.ref(parent))
        place = len(self.parents[child])
        self.kids[parent].append(Kid(self.sigs[child].task.queue_name, self.tag(child), place))
        if self.sigs[parent].optional:
            self.optional[child].append(place)

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
                FlowJob(
                    self.jobs[i],
                    tuple(self.parents[i]),
                    tuple(self.kids[i]),
                    tuple(self.optional[i]),
                    i in self.any_end,
                ),
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

            transaction.on_commit(publish, using=first.using_db, robust=True)
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


class BatchProgress(NamedTuple):
    """How far a batch is: ``done`` of its ``total`` members have ended (with only
    ``on_success``: have succeeded)."""

    done: int
    total: int

    @property
    def complete(self) -> bool:
        return self.done >= self.total


@dataclass(frozen=True)
class Batch(Workflow):
    """The handle of an enqueued :class:`batch`: ``jobs`` (members, then ``on_success``,
    then ``on_complete``), ``final`` (the callbacks), ``members`` and each callback's
    ``Job`` (None when not given)."""

    members: tuple[Job, ...] = ()
    on_success: Job | None = None
    on_complete: Job | None = None

    def progress(self) -> BatchProgress:
        """``done of total``, read from the callback's links (one round trip, O(1) for a
        batch of any size). ``LookupError`` once the callback was deleted, or its result
        expired after it ran."""
        cb = self.on_complete or self.on_success
        assert cb is not None  # a batch has one at least
        total = len(self.members)
        links = get_queue(cb.queue_name).read.progress(cb.id)
        if links is not None:
            return BatchProgress(min(links.got, total), total)
        status = cb.status()  # no links: acked (every member was in), or gone
        if status == "finished":
            return BatchProgress(total, total)
        raise LookupError(f"batch callback {cb.id!r} is {status}: its progress is gone")


@dataclass(frozen=True)
class batch:
    """Members run in parallel; ``on_complete`` runs exactly once when every member has
    ended (succeeded, dead, cancelled, deleted or expired), ``on_success`` exactly once
    when every member has succeeded (else it ends dead with ``dependency <tag>
    failed``, as a chord's callback). Each callback (unless ``.si()``) gets a summary
    as its first argument: ``{"total": n, "succeeded": [ids], "dead": [ids],
    "cancelled": [ids], "expired": [ids], "results": {id: result}}`` (a deleted member
    counts as cancelled)."""

    members: tuple[Signature, ...]
    on_success: Signature | None
    on_complete: Signature | None

    def __init__(
        self,
        members: Iterable[Signature],
        on_success: Signature | None = None,
        on_complete: Signature | None = None,
    ) -> None:
        sigs = _signatures(members, "batch")
        given = [c for c in (on_success, on_complete) if c is not None]
        if not given:
            raise InvalidArgument(
                "a batch takes on_success, on_complete or both (without either, use group)"
            )
        _signatures(given, "batch callback")
        object.__setattr__(self, "members", tuple(sigs))
        object.__setattr__(self, "on_success", on_success)
        object.__setattr__(self, "on_complete", on_complete)

    def enqueue(self) -> Batch:
        plan = _Plan()
        callbacks = [c for c in (self.on_success, self.on_complete) if c is not None]
        out = {"out": 1} if any(not c.immutable for c in callbacks) else {}
        for s in self.members:
            plan.add(s, dict(out))
        n = len(self.members)
        ends: dict[str, int] = {}
        for name, cb in (("success", self.on_success), ("complete", self.on_complete)):
            if cb is not None:
                ends[name] = plan.add(
                    cb, {"keep": 1} if cb.immutable else {"in": "batch", "keep": 1}
                )
        if "complete" in ends:
            plan.any_end.add(ends["complete"])
        plan.prepare()
        for i in range(n):
            for last in ends.values():
                plan.link(i, last)
        wf = plan.send(list(ends.values()))
        return Batch(
            wf.jobs,
            wf.final,
            wf.jobs[:n],
            wf.jobs[ends["success"]] if "success" in ends else None,
            wf.jobs[ends["complete"]] if "complete" in ends else None,
        )
