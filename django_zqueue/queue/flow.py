"""Workflows on the queue: jobs that wait for parents, a workflow published over several
queues, and a job's links (docs/workflows.md). The links and the dispatch of a job's end
to its dependents are the engine's (``engine.flow_publish``:
:mod:`django_zqueue.engine.flow_publish`, over :mod:`django_zqueue.engine.flow`); this
module checks the input and asks those verbs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from ..engine.records import NewJob
from ..engine.records.links import MAX_LINKS, Ended, FlowJob, Links, OptionalParent, Ref
from ..engine.records.links import passed_ends as decode_ends
from ..engine.records.links import passed_results as decode_results
from ..exceptions import DuplicateJob, InvalidArgument
from .publish import Publishing


def parse_ref(value: Any, default_queue: str) -> Ref:
    """A parent given as a tag (of ``default_queue``), a ``(queue, tag)`` pair, or any
    object with ``id`` and ``queue_name`` (a task's ``Job``); any of them wrapped in
    ``optional(...)``."""
    if isinstance(value, OptionalParent):
        value = value.parent
    if isinstance(value, str):
        return Ref(default_queue, value)
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(x, str) for x in value):
        return Ref(value[0], value[1])
    tag, queue = getattr(value, "id", None), getattr(value, "queue_name", None)
    if isinstance(tag, str) and isinstance(queue, str):
        return Ref(queue, tag)
    raise InvalidArgument(
        f"depends_on takes job tags, (queue, tag) pairs or Job handles; got {value!r}"
    )


class Flows(Publishing):
    """The workflow side of a queue."""

    # ----------------------------------------------------------------- publishing

    def publish(
        self,
        body: Any,
        tag: str | None = None,
        priority: int = 0,
        score: float | None = None,
        delay: float | timedelta | None = None,
        run_at: datetime | None = None,
        *,
        max_retries: int | None = None,
        visibility_timeout: float | None = None,
        debounce: float | timedelta | None = None,
        unique_for: float | timedelta | None = None,
        group: str | None = None,
        expires: float | timedelta | datetime | None = None,
        depends_on: Iterable[Any] | None = None,
    ) -> str:
        """As :meth:`Publishing.publish`; with ``depends_on`` (tags of this queue,
        ``(queue, tag)`` pairs or ``Job`` handles) the job waits (state ``waiting``)
        until every parent has succeeded: see :meth:`publish_after`. ``depends_on`` does
        not go with ``debounce`` or ``unique_for``."""
        if depends_on is None:
            return super().publish(
                body,
                tag,
                priority,
                score,
                delay,
                run_at,
                max_retries=max_retries,
                visibility_timeout=visibility_timeout,
                debounce=debounce,
                unique_for=unique_for,
                group=group,
                expires=expires,
            )
        if debounce is not None or unique_for is not None:
            raise InvalidArgument("depends_on does not go with debounce or unique_for")
        job = self.prepare(
            body,
            tag,
            priority,
            score,
            delay,
            run_at,
            max_retries=max_retries,
            visibility_timeout=visibility_timeout,
            group=group,
            expires=expires,
        )
        return self.publish_after(job, depends_on)

    def publish_after(self, job: NewJob, depends_on: Iterable[Any]) -> str:
        """Publish ``job`` waiting for existing jobs: it enters the line once all have
        succeeded, exactly once. A parent that is no longer in its queue (finished, or
        never published) counts as succeeded; a dead one as failed (the job then goes to
        dead letters with ``dependency <tag> failed``; requeueing the parent revives it).
        A parent given as ``optional(parent)`` counts however it ends: its failure lets
        the job run."""
        if isinstance(depends_on, str | bytes):  # not its characters: one tag each
            raise InvalidArgument(
                f"depends_on takes a list of job tags, (queue, tag) pairs or Job handles, "
                f"not a single {type(depends_on).__name__}: depends_on=[{depends_on!r}]"
            )
        given = list(depends_on)
        parents = tuple(parse_ref(p, self.name) for p in given)
        optional = tuple(i for i, p in enumerate(given, 1) if isinstance(p, OptionalParent))
        if Ref(self.name, job.tag) in parents:
            raise InvalidArgument(f"job {job.tag!r} cannot depend on itself")
        if not parents:
            return self.publish_prepared([job])[0]
        if len(parents) > MAX_LINKS or len(set(parents)) != len(parents):
            raise InvalidArgument(f"depends_on takes 1..{MAX_LINKS} distinct jobs")
        if job.spec.delay_ms is not None or job.spec.run_at_ms is not None:
            raise InvalidArgument("a job that depends on others cannot also be delayed")
        flows = self.engine.flow_publish
        found = flows.publish_waiting(FlowJob(job, parents, optional=optional))
        if found:
            raise DuplicateJob([t for t, _ in found], [s for _, s in found])
        flows.link_parents(job.tag, parents)
        return job.tag

    # ----------------------------------------------------------------- dispatch

    def dispatch(self, tags: Sequence[str]) -> int:
        """Apply the outbox entries of jobs ``tags`` of this queue to their dependents,
        then of the dependents buried on the way (up to 20 levels; the scanner's
        :meth:`drain` goes on from there). Returns the entries applied. Idempotent: any
        number of processes may dispatch the same entries."""
        return self.engine.flow_publish.dispatch(tags)

    # ----------------------------------------------------------------- reading

    def links(self, tag: str) -> Links | None:
        """Job ``tag``'s parents and dependents (None: it has none, or it is gone)."""
        return Links.decode(self.engine.reads.links_hash(tag))

    def passed_results(self, tag: str) -> list[Any]:
        """The results job ``tag``'s parents passed on, in the order of its parents
        (``LookupError`` when one is missing)."""
        return decode_results(self.engine.reads.links_hash(tag))

    def outbox_size(self) -> int:
        """Entries waiting for dispatch (all shards)."""
        return self.engine.flow_publish.outbox_size()


def passed_ends(q: Flows, tag: str) -> list[Ended]:
    """How each parent of job ``tag`` of ``q`` ended, in the order of its parents (what a
    batch's callback is given); ``LookupError`` while one has not."""
    return decode_ends(q.engine.reads.links_hash(tag))


def publish_flow(parts: Sequence[tuple[Flows, FlowJob]]) -> list[str]:
    """Publish the jobs of a workflow over any queues: first every job that waits for
    parents (they cannot run yet), then the others, so a parent never ends before its
    dependents exist. Tags and room (``max_length``) are checked first (nothing written
    on a clash or a full queue). If a step fails, every job already written by this call
    is deleted again."""
    if not parts:
        return []
    check_free(parts)
    check_room([(q, fj) for q, fj in parts if not fj.need])
    first = [(q, fj) for q, fj in parts if fj.need]
    second = [(q, fj) for q, fj in parts if not fj.need]
    queues = {q.name: q for q, _ in parts}
    written: list[Ref] = []
    try:
        for step in (first, second):
            _send_step(step, written)
    except Exception:
        for ref in written:
            with contextlib.suppress(Exception):  # the original error says more
                queues[ref.queue].engine.flow_publish.remove(ref.tag)
        raise
    return [fj.job.tag for _, fj in parts]


def _send_step(step: Sequence[tuple[Flows, FlowJob]], written: list[Ref]) -> None:
    """Send one step's calls, one round trip per ``PUBLISH_WINDOW`` calls; add to
    ``written`` the jobs of each call that wrote its jobs (a call refused on a clash or a
    full queue wrote nothing)."""
    by_queue: dict[str, tuple[Flows, list[FlowJob]]] = {}
    for q, fj in step:
        by_queue.setdefault(q.name, (q, []))[1].append(fj)
    if not by_queue:
        return
    head = next(iter(by_queue.values()))[0]
    groups = [(q.engine.flow_publish, jobs) for q, jobs in by_queue.values()]
    head.engine.flow_publish.publish_step(groups, written)


def check_room(parts: Sequence[tuple[Flows, FlowJob]]) -> None:
    """QueueFull (nothing written) when the jobs that enter a line now do not fit in
    their shard's ``max_length`` or their group's ``group_max_length``: one round trip
    each, only for queues with the limit."""
    if parts:
        parts[0][0].engine.flow_publish.check_room(
            [(q.engine.flow_publish, fj.job.tag, fj.job.spec.group or "") for q, fj in parts]
        )


def check_free(parts: Sequence[tuple[Flows, FlowJob]]) -> None:
    """DuplicateJob (nothing written) when a tag is used twice or is taken."""
    seen: set[Ref] = set()
    dupes = []
    for q, fj in parts:
        ref = Ref(q.name, fj.job.tag)
        if ref in seen:
            dupes.append(ref.tag)
        seen.add(ref)
    if dupes:
        raise DuplicateJob(dupes, ["batch"] * len(dupes))
    head = parts[0][0].engine.flow_publish
    # rare: one more round trip to name each clash's state, as publish does
    taken = head.taken([(q.engine.flow_publish, fj.job.tag) for q, fj in parts])
    if taken:
        tags = [parts[i][1].job.tag for i, _ in taken]
        raise DuplicateJob(tags, [state or "unknown" for _, state in taken])
