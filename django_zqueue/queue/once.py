"""Publishing one job under a tag with debounce and unique-for rules
(``publish_once.lua``); the exact rules are in docs/job-control.md."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from ..engine.records import NewJob
from ..engine.records.spec import JobSpec
from ..engine.writes import OnceResult
from ..exceptions import InvalidArgument
from .base import QueueBase

__all__ = ["Once", "OnceResult"]


class Once(QueueBase):
    """One job under a caller's tag: debounced, or kept unique for a while."""

    def publish_once(
        self,
        job: NewJob,
        *,
        debounce: float | timedelta | None = None,
        unique_for: float | timedelta | None = None,
    ) -> OnceResult:
        """Send a job made by :meth:`prepare` (with the caller's tag) under these rules,
        in one script call:

        - ``debounce`` (seconds): while a job with this tag waits (ready or delayed),
          replace its arguments and options and move its run-at to now + ``debounce``;
          with no job under the tag, publish it to run in ``debounce`` seconds. The job
          must have no ``delay`` or ``run_at`` of its own.
        - ``unique_for`` (seconds): refuse the tag for ``unique_for`` seconds after the
          job under it finished (was acked), on top of the usual refusal while a job
          with the tag is waiting, running or dead.

        Returns ``"new"`` or ``"replaced"``; raises :class:`DuplicateJob` (nothing
        written) when the tag is running, dead or reserved (or waiting, without
        ``debounce``)."""
        if debounce is not None or unique_for is not None:
            rules = JobSpec.build(debounce=debounce, unique_for=unique_for)
            if rules.debounce_ms is not None and (
                job.spec.delay_ms is not None or job.spec.run_at_ms is not None
            ):
                raise InvalidArgument("debounce sets the run-at: give no delay or run_at with it")
            spec = replace(job.spec, debounce_ms=rules.debounce_ms, unique_ms=rules.unique_ms)
            job = job._replace(spec=spec)
        return self.engine.writes.publish_once(job)
