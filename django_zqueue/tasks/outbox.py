"""The transactional outbox (``ZQUEUE["OUTBOX"] = True``): no job lost at commit.

Without it, a job enqueued inside ``transaction.atomic`` is published by an on-commit
callback: if Redis is unreachable at that moment the transaction has committed and the
job is lost (one ``publish_after_commit_failed`` line). With it, :func:`write` stores the
job, validated and encoded as it would have been published (a
:class:`~django_zqueue.queue.NewJob`: tag, body and options), as a row of
:class:`OutboxEntry` in the same transaction: the row commits with the caller's data or
not at all.

A relay publishes the rows and deletes them (:func:`relay`): the scanner of every worker
runs it every :data:`RELAY_INTERVAL` seconds, ``zqueue_scanner`` too. Each batch (at
most :data:`BATCH` rows, oldest first) is taken in a database transaction, published
with the rows' tags, and deleted in that transaction:

- exactly once per row: a replay of a row already published (the relay died between the
  publish and the commit of its delete) meets its own tag, ``DuplicateJob``, and the row
  is deleted. (The tag dedups while the first copy is in the queue, ready, delayed,
  running or dead; only a replay after that job already *finished*, within that one
  round trip, would run it twice.)
- in order: rows are published in ``id`` order. Where the database can skip locked rows
  (PostgreSQL, MySQL 8, Oracle), relays take batches with ``SELECT ... FOR UPDATE SKIP
  LOCKED`` and a relay publishes only while it holds the oldest waiting row, so two
  relays never take the same row nor overtake one another; elsewhere (SQLite) two relays
  may both take a row, and the tag dedups the second publish.
- Redis down: the batch's publish fails, nothing is deleted; the rows wait for the next
  relay step. A row that can never be published (its queue was removed from
  ``ZQUEUE["QUEUES"]``, ...) keeps the error in ``last_error`` and is passed over (the
  admin lists it).

Jobs with ``depends_on`` and workflows are not written to the outbox: they are published
on commit as without it. This module is imported lazily (it defines a model): by ``models``, and by
``task`` and ``scanner`` when the outbox is on.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, models, router, transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy

from ..engine.records.spec import spec_fields, spec_of
from ..engine.redis.outages import full_refusal, is_unavailable
from ..events import kv
from ..exceptions import DuplicateJob, ZQueueError
from ..queue import NewJob, Queue, get_queue

log = logging.getLogger("django_zqueue.outbox")

#: most rows one relay transaction takes
BATCH = 100
#: most batches one relay step takes (per database): then the next step carries on
MAX_BATCHES = 10
#: seconds between two relay steps of a worker or zqueue_scanner
RELAY_INTERVAL = 0.25
#: the queue stats counter of rows relayed (``zqueue_jobs_relayed_total``)
RELAYED_COUNTER = "relayed"


class OutboxEntry(models.Model):
    """A job enqueued inside a transaction, waiting to be published (``ZQUEUE["OUTBOX"]``).

    ``body`` is the encoded payload and ``options`` the other fields of the
    :class:`~django_zqueue.queue.NewJob` (JSON); ``debounce`` and ``unique_for`` the
    task's once rules (seconds), if any."""

    id = models.BigAutoField(primary_key=True)
    queue = models.CharField(max_length=200)
    tag = models.CharField(max_length=256)
    task = models.CharField(max_length=300, blank=True, default="")
    body = models.BinaryField()
    options = models.TextField(default="{}")
    debounce = models.FloatField(null=True, blank=True)
    unique_for = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_error = models.TextField(blank=True, default="")

    class Meta:
        app_label = "django_zqueue"
        ordering = ["id"]
        default_permissions = ("view",)
        verbose_name = gettext_lazy("outbox entry")
        verbose_name_plural = gettext_lazy("outbox")

    def __str__(self) -> str:
        return f"{self.task or 'job'} {self.tag} -> {self.queue}"

    def job(self, now: Any = None) -> NewJob:
        """The job this row holds, as :meth:`Queue.prepare` made it; a delay counts from
        when the row was written."""
        spec = spec_of(json.loads(self.options))
        elapsed = ((now or timezone.now()) - self.created_at).total_seconds() * 1000
        if spec.delay_ms is not None:
            left = int(spec.delay_ms - elapsed)
            spec = replace(spec, delay_ms=left if left > 0 else None)
        if spec.expires_in_ms is not None:  # at least 1 ms: past it, it expires at once
            spec = replace(spec, expires_in_ms=max(1, int(spec.expires_in_ms - elapsed)))
        return NewJob(self.tag, bytes(self.body), spec)


def row_of(queue: str, task: str, job: NewJob, **once: float | None) -> OutboxEntry:
    """The outbox row of a prepared job (not saved)."""
    options = spec_fields(job.spec)
    return OutboxEntry(
        queue=queue,
        tag=job.tag,
        task=task,
        body=job.body,
        options=json.dumps(options, separators=(",", ":")),
        debounce=once.get("debounce"),
        unique_for=once.get("unique_for"),
    )


def write(
    queue: str,
    task: str,
    jobs: Sequence[NewJob],
    *,
    using: str | None = None,
    debounce: float | None = None,
    unique_for: float | None = None,
) -> None:
    """Store ``jobs`` in the outbox of database ``using``, in its current transaction."""
    rows = [row_of(queue, task, j, debounce=debounce, unique_for=unique_for) for j in jobs]
    OutboxEntry.objects.using(using or DEFAULT_DB_ALIAS).bulk_create(rows)


#: seconds before a database found without the outbox table is looked at again
TABLE_RECHECK = 60.0
_tables: dict[str, tuple[bool, float]] = {}  # alias -> (has the table, when it was read)


def databases() -> list[str]:
    """The databases that hold the outbox table: those the router lets django_zqueue
    migrate to, where the table exists (read once per process; a database without it is
    read again after :data:`TABLE_RECHECK` seconds, e.g. once it is migrated)."""
    now = time.monotonic()
    found = []
    for alias in connections:
        if not router.allow_migrate_model(alias, OutboxEntry):
            continue
        known = _tables.get(alias)
        if known is None or (not known[0] and now - known[1] >= TABLE_RECHECK):
            with connections[alias].cursor() as cursor:
                names = connections[alias].introspection.table_names(cursor)
            known = _tables[alias] = (OutboxEntry._meta.db_table in names, now)
        if known[0]:
            found.append(alias)
    return found


def close_broken_connections() -> None:
    """After a failed relay step: close this thread's outbox connections that are no
    longer usable, so the next step opens new ones."""
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None and not conn.is_usable():
            conn.close()


def waiting(aliases: Iterable[str] | None = None) -> int:
    """Rows waiting to be published (those set aside with an error included)."""
    return sum(
        OutboxEntry.objects.using(a).count() for a in (databases() if aliases is None else aliases)
    )


@dataclass
class Relayed:
    """What a relay step did."""

    published: int = 0  # rows published and deleted
    duplicates: int = 0  # rows whose tag was already in the queue: deleted
    failed: int = 0  # rows set aside with an error

    def add(self, other: Relayed) -> None:
        self.published += other.published
        self.duplicates += other.duplicates
        self.failed += other.failed

    @property
    def rows(self) -> int:
        return self.published + self.duplicates + self.failed


def relay(*, batch: int = BATCH, max_batches: int = MAX_BATCHES) -> Relayed:
    """One relay step: up to ``max_batches`` batches of the oldest rows of each database.
    Raises what Redis or the database raise (rows published before are deleted)."""
    total = Relayed()
    for alias in databases():
        for _ in range(max_batches):
            done = relay_batch(alias, batch)
            total.add(done)
            if done.rows < batch:
                break
    return total


def take(alias: str, batch: int) -> list[OutboxEntry]:
    """The oldest ``batch`` rows, locked where the database can skip locked rows: then
    none unless this relay holds the oldest waiting row (another relay goes first)."""
    rows = OutboxEntry.objects.using(alias).filter(last_error="").order_by("id")
    if not connections[alias].features.has_select_for_update_skip_locked:
        return list(rows[:batch])
    head = rows.values_list("id", flat=True).first()
    if head is None:
        return []
    taken = list(rows.select_for_update(skip_locked=True)[:batch])
    return taken if taken and taken[0].id == head else []


def relay_batch(alias: str, batch: int = BATCH) -> Relayed:
    """Publish and delete one batch of database ``alias``, in one transaction."""
    result = Relayed()
    failure: BaseException | None = None
    with transaction.atomic(using=alias):
        rows = take(alias, batch)
        done: list[int] = []
        errors: dict[int, str] = {}
        try:
            for queue_name, run in _runs(rows):
                _publish_run(queue_name, run, done, errors, result)
        except Exception as exc:  # Redis down: keep what was done, the rest waits
            failure = exc
        if done:
            OutboxEntry.objects.using(alias).filter(id__in=done).delete()
        for row_id, error in errors.items():
            OutboxEntry.objects.using(alias).filter(id=row_id).update(last_error=error)
    if failure is not None:
        raise failure
    return result


def _runs(rows: Sequence[OutboxEntry]) -> Iterable[tuple[str, list[OutboxEntry]]]:
    """Consecutive rows of one queue, in order."""
    run: list[OutboxEntry] = []
    for row in rows:
        if run and row.queue != run[0].queue:
            yield run[0].queue, run
            run = []
        run.append(row)
    if run:
        yield run[0].queue, run


def _publish_run(
    queue_name: str,
    rows: list[OutboxEntry],
    done: list[int],
    errors: dict[int, str],
    result: Relayed,
) -> None:
    """Publish rows of one queue: the plain ones of the run in one call when they can
    be, else one by one (a clash, a bad row, the once rules)."""
    try:
        queue = get_queue(queue_name)
    except ZQueueError as exc:
        for row in rows:
            _set_aside(row, exc, errors, result)
        return
    now = timezone.now()
    jobs = [row.job(now) for row in rows]
    before = result.published
    plain = all(row.debounce is None and row.unique_for is None for row in rows)
    if plain and len(rows) > 1:
        try:
            queue.publish_prepared(jobs)
        except Exception as exc:
            if is_unavailable(exc) or full_refusal(exc):  # Redis down or full: rows wait
                raise
            # a clash (a replay) or a bad row: find which, one by one
        else:
            done.extend(row.id for row in rows)
            result.published += len(rows)
            _count(queue, len(rows))
            return
    try:
        for row, job in zip(rows, jobs, strict=True):
            _publish_one(queue, row, job, done, errors, result)
    finally:
        _count(queue, result.published - before)


def _publish_one(
    queue: Queue,
    row: OutboxEntry,
    job: NewJob,
    done: list[int],
    errors: dict[int, str],
    result: Relayed,
) -> None:
    """Publish one row alone. A duplicate is done (a replay of a row already sent); a bad
    row is set aside; Redis down or full, or an error that is not the row's, raises: the
    row waits for the next relay."""
    try:
        if row.debounce is None and row.unique_for is None:
            queue.publish_prepared([job])
        else:
            queue.publish_once(job, debounce=row.debounce, unique_for=row.unique_for)
    except DuplicateJob as exc:
        log.info(
            kv(
                event="outbox_duplicate",
                queue=queue.name,
                job=row.tag,
                task=row.task,
                row=row.id,
                state=exc.states[0] if exc.states else "",
            )
        )
        done.append(row.id)
        result.duplicates += 1
    except Exception as exc:
        if (
            is_unavailable(exc)
            or full_refusal(exc)  # Redis at maxmemory: the row waits, not set aside
            or not isinstance(exc, ZQueueError | ValueError)
        ):
            raise
        _set_aside(row, exc, errors, result)
    else:
        done.append(row.id)
        result.published += 1


def _set_aside(row: OutboxEntry, exc: BaseException, errors: dict[int, str], r: Relayed) -> None:
    error = f"{type(exc).__name__}: {exc}"
    log.error(
        kv(event="outbox_row_failed", queue=row.queue, job=row.tag, row=row.id, error=error[:200])
    )
    errors[row.id] = error
    r.failed += 1


def _count(queue: Queue, n: int) -> None:
    """Add ``n`` to the queue's ``relayed`` counter (best effort: the jobs are out)."""
    if n <= 0:
        return
    try:
        queue.engine.stats.incr(RELAYED_COUNTER, n)
    except Exception as exc:
        log.warning(kv(event="outbox_count_failed", queue=queue.name, error=str(exc)[:200]))
