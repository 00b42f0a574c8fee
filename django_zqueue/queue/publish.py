"""Publishing: a job validated and encoded (:class:`~django_zqueue.engine.records.NewJob`), then
sent to its shard, at most 100 jobs per script call, all in one round trip."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from ..engine.records import NewJob, encode_body, new_tag, validate
from ..engine.records.spec import JobOptions, JobSpec, plain_spec
from ..exceptions import InvalidArgument, PayloadTooLarge
from .once import Once

_NONE6 = (None,) * 6

__all__ = ["Publishing"]


class Publishing(Once):
    """The write side of a queue: new jobs."""

    def prepare(
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
        group: str | None = None,
        expires: float | timedelta | datetime | None = None,
        options: JobOptions | None = None,
    ) -> NewJob:
        """Validate and encode one job without sending it (see :meth:`publish_prepared`).

        ``options`` gives the job's options as one value (a :class:`JobOptions`, checked
        when made) instead of the keywords; its ``debounce`` and ``unique_for`` are left
        to :meth:`publish_once`. Raises exactly what :meth:`publish` raises for bad
        input; touches no Redis."""
        data = encode_body(body)  # the body first: its errors before the options'
        if len(data) > self.options.max_payload_bytes:
            raise PayloadTooLarge(len(data), self.options.max_payload_bytes)
        if options is None:
            retries = self.options.max_retries if max_retries is None else max_retries
            if (
                type(priority) is int
                and type(retries) is int
                and (score, delay, run_at, visibility_timeout, group, expires) == _NONE6
            ):  # the common case: one spec per priority and retries, checked once
                spec = plain_spec(priority, retries)
            else:
                spec = self._spec(
                    priority, score, delay, run_at, max_retries, visibility_timeout, group, expires
                )
            if tag is None:
                return NewJob(new_tag(), data, spec, True)
            return NewJob(validate.tag(tag), data, spec)
        if (priority, score, delay, run_at, max_retries, visibility_timeout, group) != (
            0,
            *[None] * 6,
        ) or expires is not None:
            raise InvalidArgument("give the job's options as options= or as keywords, not both")
        return self._made(data, tag, self._spec_of(options))

    def _data(self, body: Any) -> bytes:
        """A body encoded, within the queue's ``max_payload_bytes``."""
        data = encode_body(body)
        if len(data) > self.options.max_payload_bytes:
            raise PayloadTooLarge(len(data), self.options.max_payload_bytes)
        return data

    def _spec(
        self,
        priority: int,
        score: float | None,
        delay: float | timedelta | None,
        run_at: datetime | None,
        max_retries: int | None,
        visibility_timeout: float | None,
        group: str | None,
        expires: float | timedelta | datetime | None,
    ) -> JobSpec:
        """The spec of a job of these options given as keywords (checked once)."""
        retries = self.options.max_retries if max_retries is None else max_retries
        if (
            type(priority) is int
            and type(retries) is int
            and score is None
            and delay is None
            and run_at is None
            and visibility_timeout is None
            and group is None
            and expires is None
        ):  # the common case: one spec per priority and retries, checked once
            return plain_spec(priority, retries)
        return JobSpec.build(
            priority=priority,
            score=score,
            delay=delay,
            run_at=run_at,
            max_retries=retries,
            visibility_timeout=visibility_timeout,
            group=group,
            weight=self._weight(group),
            expires=expires,
        )

    def _spec_of(self, options: JobOptions) -> JobSpec:
        """The spec of a job of these options (checked when made), with the queue's
        retries and its group's weight, without the rules of publish_once. An ordering
        key is refused in a fair or partitioned queue (docs/job-control.md)."""
        if options.ordering_key is not None and (
            self.options.fairness == "groups" or self.options.partitions > 1
        ):
            raise InvalidArgument(
                "ordering_key does not go with a fair queue (fairness='groups') nor a "
                "partitioned one (partitions > 1): the jobs of one key must meet in one line"
            )
        return options.job_spec(self.options.max_retries, self._weight(options.group))

    @staticmethod
    def _made(data: bytes, tag: str | None, spec: JobSpec) -> NewJob:
        if tag is None:
            return NewJob(new_tag(), data, spec, True)
        return NewJob(validate.tag(tag), data, spec)

    def _weight(self, group: str | None) -> float | None:
        """In a fair queue, the weight of the job's group (None: 1)."""
        if group is None or self.options.fairness != "groups":
            return None
        return self.options.group_weights.get(group)

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
    ) -> str:
        """Add one job; return its tag.

        ``body`` is any JSON-serialisable value. ``priority`` (an int in [-1000, 1000],
        higher first) orders the line, FIFO within a priority by a server-side
        sequence. ``score`` places the job at that raw ready score instead (lower is
        claimed sooner; see docs/architecture.md for how scores are made). ``delay``
        (seconds or timedelta) or ``run_at`` (aware datetime) holds the job back until
        then, measured on Redis' clock; a delay <= 0 or a past run-at means now.
        ``max_retries`` and ``visibility_timeout`` override the queue's options.
        ``group`` (a string of at most 200 bytes, e.g. a tenant) is the job's group key:
        with ``fairness="groups"`` the queue serves groups in weighted fair order
        (docs/fairness.md); in any queue it is kept in the record and counted per group.
        ``expires`` (seconds or timedelta from now, or an aware datetime): a job not
        started by then never starts; it ends in the state ``expired`` (docs/queue.md).

        Raises :class:`DuplicateJob` (nothing overwritten) when ``tag`` belongs to a
        ready, delayed, in-flight, dead or expired job of this queue; :class:`QueueFull`
        (nothing written) past the queue's ``max_length``.

        ``debounce`` and ``unique_for`` (seconds; both need a ``tag``) apply the rules
        of :meth:`publish_once` (docs/job-control.md).
        """
        if (debounce is not None or unique_for is not None) and tag is None:
            raise InvalidArgument("debounce and unique_for need a tag")
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
        if debounce is not None or unique_for is not None:
            self.publish_once(job, debounce=debounce, unique_for=unique_for)
            return job.tag
        return self.publish_prepared([job])[0]

    def publish_many(
        self,
        bodies: Iterable[Any],
        priority: int = 0,
        delay: float | timedelta | None = None,
        *,
        tags: Iterable[str] | None = None,
        run_at: datetime | None = None,
        max_retries: int | None = None,
        group: str | None = None,
        expires: float | timedelta | datetime | None = None,
    ) -> list[str]:
        """Add many jobs in one round trip; return their tags in order.

        Every body is validated and encoded before anything is sent. Calls of up to
        100 jobs and 128 KiB of bodies (of one partition) are all-or-nothing. A longer
        call is cut into such script calls (``conf.bounds``), pipelined, after the
        ``tags`` given are checked for clashes, so a :class:`DuplicateJob` writes nothing
        unless another client published a clashing tag in the meantime; an error that
        stops it lists in ``published`` what was written (docs/queue.md).
        Tags drawn by :func:`~django_zqueue.engine.records.new_tag` (no ``tags`` given) are not
        checked first: two of them clash with odds of about n²/2^73, and a chunk that
        meets a clash is refused by its script all the same.
        """
        tag_list = list(tags) if tags is not None else None
        body_list = list(bodies)
        if tag_list is not None and len(tag_list) != len(body_list):
            raise InvalidArgument(
                f"got {len(body_list)} bodies but {len(tag_list)} tags; give one tag per body"
            )
        spec = None  # one spec for every body, made after the first body is encoded
        jobs = []
        for i, b in enumerate(body_list):
            data = self._data(b)
            if spec is None:
                spec = self._spec(priority, None, delay, run_at, max_retries, None, group, expires)
            jobs.append(self._made(data, tag_list[i] if tag_list else None, spec))
        return self.publish_prepared(jobs)

    def publish_prepared(self, jobs: Sequence[NewJob]) -> list[str]:
        """Send jobs made by :meth:`prepare`: one script call per shard and per 100 jobs
        or 128 KiB of bodies, pipelined. A call that spans several script calls is checked
        for clashes first (see :meth:`publish_many`)."""
        return self.engine.writes.publish(jobs)
