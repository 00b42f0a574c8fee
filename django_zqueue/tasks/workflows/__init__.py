"""Chains, groups, chords and batches of task calls (docs/workflows.md).

::

    from django_zqueue import chain, group, chord

    chain(fetch.s(url), parse.s(), store.s()).enqueue()   # each gets the previous result
    group(resize.s(i) for i in ids).enqueue()             # parallel; .results() in order
    chord((resize.s(i) for i in ids), notify.s()).enqueue()  # notify([r1, r2, ...]) once
    batch((resize.s(i) for i in ids), on_complete=report.s()).enqueue()  # report(summary)
    chain(fetch.s(url), optional(parse.s()), store.s())  # store(None) if parse fails
    chain(fetch.s(url), group([a.s(), b.s()]), merge.s())  # merge([ra, rb])

Canvases nest (a chain of groups, a group of chains, a chord whose header holds chains):
each compiles into the jobs and links of one workflow (:mod:`.workflow_plan`).

A signature (``task.s(...)``) becomes one job. Links between jobs are written with the
jobs (``wf_publish.lua``); a job that waits for parents has status ``"waiting"`` and enters
the line exactly once, when its last parent has succeeded (an ``optional`` parent, or
any parent of a batch's ``on_complete``: has ended). Results pass from parent to
dependent through the dependent's links in Redis (JSON, at most
``links.MAX_PASSED_BYTES`` each), not through an expiring result store. Inside
``transaction.atomic`` the whole workflow is published when the transaction commits
(and never on rollback).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple, Union, overload

from ...engine.records.links import MAX_LINKS, OptionalParent
from ...exceptions import InvalidArgument
from ...queue import get_queue
from ..job import PENDING
from ..task import Job, Signature
from .plan import Inputs, Plan

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
    if isinstance(parent, chain | group | chord | batch):
        raise InvalidArgument(
            "optional() marks one job: wrap a signature (chain(a.s(), optional(b.s()))) "
            "or a job of depends_on, not a whole canvas"
        )
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
        """Poll until every final job has finished (for scripts and tests); their results.
        ``LookupError`` after ``timeout`` seconds; :class:`~django_zqueue.exceptions.JobEnded`
        at once when a final job can give no result (as :meth:`Job.wait
        <django_zqueue.tasks.job.Job.wait>`: it ended dead, expired or cancelled, or kept none)."""
        deadline = time.monotonic() + timeout
        found: dict[int, Any] = {}
        while True:
            for i, job in enumerate(self.final):
                if i not in found:
                    value = job.settled()
                    if value is not PENDING:
                        found[i] = value
            if len(found) == len(self.final):
                return [found[i] for i in range(len(self.final))]
            if time.monotonic() > deadline:
                return self.results()  # the LookupError of one still missing
            time.sleep(interval)


Canvas = Union["Signature", "chain", "group", "chord"]


def _steps(items: Iterable[Any], what: str, least: int = 1) -> list[Canvas]:
    """The steps of a canvas: signatures, chains, groups and chords (a batch is not a
    step: it has callbacks of its own)."""
    steps = list(items)
    for s in steps:
        if isinstance(s, batch):
            raise InvalidArgument(f"a {what} cannot hold a batch: enqueue the batch on its own")
        if not isinstance(s, Signature | chain | group | chord):
            raise InvalidArgument(
                f"a {what} takes signatures (task.s(...)), chains, groups and chords; got {s!r}"
            )
    if not least <= len(steps) <= MAX_LINKS:
        raise InvalidArgument(f"{what} takes {least}..{MAX_LINKS} steps, got {len(steps)}")
    return steps


def _signatures(items: Iterable[Any], what: str, least: int = 1) -> list[Signature]:
    sigs = list(items)
    for s in sigs:
        if not isinstance(s, Signature):
            raise InvalidArgument(f"a {what} takes signatures (task.s(...)), got {s!r}")
    if not least <= len(sigs) <= MAX_LINKS:
        raise InvalidArgument(f"{what} takes {least}..{MAX_LINKS} signatures, got {len(sigs)}")
    return sigs


def _compile(step: Canvas, plan: Plan, inputs: Inputs) -> Inputs:
    """Add ``step`` to ``plan``, waiting for ``inputs``; its outputs."""
    if isinstance(step, Signature):
        return Inputs((plan.call(step, inputs),))
    return step.compile(plan, inputs)


def _send(step: chain | group | chord) -> Workflow:
    plan = Plan()
    out = step.compile(plan, Inputs())
    jobs = plan.send(out.jobs)
    return Workflow(jobs, tuple(jobs[i] for i in out.jobs))


@dataclass(frozen=True)
class chain:  # named as in Celery's canvas, which it replaces
    """Steps run one after another; each (unless ``.si()``) gets the previous step's
    result as its first argument: a job's return value, or the list of a group's results
    (a group followed by a step is a chord). If one ends dead, the rest end dead with
    ``dependency <tag> failed`` (requeueing it revives them)."""

    sigs: tuple[Canvas, ...]

    def __init__(self, *sigs: Canvas) -> None:
        object.__setattr__(self, "sigs", tuple(_steps(sigs, "chain")))

    def compile(self, plan: Plan, inputs: Inputs) -> Inputs:
        for step in self.sigs:
            inputs = _compile(step, plan, inputs)
        return inputs

    def enqueue(self) -> Workflow:
        return _send(self)


@dataclass(frozen=True)
class group:
    """Steps run in parallel (each waiting for what the group waits for, and getting its
    result); the results are the list of each step's result, in the order given (a
    nested group's are flattened into it)."""

    sigs: tuple[Canvas, ...]

    def __init__(self, sigs: Iterable[Canvas]) -> None:
        object.__setattr__(self, "sigs", tuple(_steps(sigs, "group")))

    def compile(self, plan: Plan, inputs: Inputs) -> Inputs:
        outputs: list[int] = []
        for n, step in enumerate(self.sigs, 1):
            out = _compile(step, plan, inputs)
            if out.many and not isinstance(step, group):
                raise InvalidArgument(
                    "a step of a group, a chord's header or a batch must end in one job (a task, "
                    f"or a chain or chord ending in one): step {n} (a {type(step).__name__}) "
                    "ends in a group, whose results would nest; end it with a task, or make "
                    "it a chord"
                )
            outputs.extend(out.jobs)
        return Inputs(tuple(outputs), many=True)

    def enqueue(self) -> Workflow:
        return _send(self)


@dataclass(frozen=True)
class chord:
    """A group (the header), then ``callback`` once every job it ends in has succeeded,
    with the list of their results (in the order given) as its first argument (unless
    ``.si()``). It fires exactly once; if a member ends dead, the callback ends dead with
    ``dependency <tag> failed`` (requeueing the member revives it). The header's steps
    and the callback may be chains, groups or chords."""

    header: tuple[Canvas, ...]
    callback: Canvas

    def __init__(self, header: Iterable[Canvas], callback: Canvas) -> None:
        object.__setattr__(self, "header", tuple(_steps(header, "chord")))
        object.__setattr__(self, "callback", _steps([callback], "chord callback")[0])

    def compile(self, plan: Plan, inputs: Inputs) -> Inputs:
        return _compile(self.callback, plan, group(self.header).compile(plan, inputs))

    def enqueue(self) -> Workflow:
        return _send(self)


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
    """The handle of an enqueued :class:`batch`: ``jobs`` (the members' jobs, then
    ``on_success``, then ``on_complete``), ``final`` (the callbacks), ``members`` (the
    job each member ends in: the summary's ids) and each callback's ``Job`` (None when
    not given)."""

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
    counts as cancelled). A member may be a chain or a chord (it counts by the job it
    ends in) or a group (its members are the batch's)."""

    members: tuple[Canvas, ...]
    on_success: Signature | None
    on_complete: Signature | None

    def __init__(
        self,
        members: Iterable[Canvas],
        on_success: Signature | None = None,
        on_complete: Signature | None = None,
    ) -> None:
        steps = _steps(members, "batch")
        given = [c for c in (on_success, on_complete) if c is not None]
        if not given:
            raise InvalidArgument(
                "a batch takes on_success, on_complete or both (without either, use group)"
            )
        _signatures(given, "batch callback")
        object.__setattr__(self, "members", tuple(steps))
        object.__setattr__(self, "on_success", on_success)
        object.__setattr__(self, "on_complete", on_complete)

    def enqueue(self) -> Batch:
        plan = Plan()
        members = group(self.members).compile(plan, Inputs()).jobs  # the jobs they end in
        callbacks = [c for c in (self.on_success, self.on_complete) if c is not None]
        if any(not c.immutable for c in callbacks):
            for i in members:
                plan.flows[i]["out"] = 1
        ends: dict[str, int] = {}
        for name, cb in (("success", self.on_success), ("complete", self.on_complete)):
            if cb is not None:
                flow = {} if cb.immutable else {"in": "batch"}
                ends[name] = plan.add(cb, flow)
        if "complete" in ends:
            plan.any_end.add(ends["complete"])
        for i in members:
            for last in ends.values():
                plan.edge(i, last)
        jobs = plan.send(list(ends.values()))
        return Batch(
            jobs,
            tuple(jobs[i] for i in ends.values()),
            tuple(jobs[i] for i in members),
            jobs[ends["success"]] if "success" in ends else None,
            jobs[ends["complete"]] if "complete" in ends else None,
        )
