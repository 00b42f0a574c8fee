"""Read-only queries for the admin dashboard, returning plain data.

Every function here only reads, and its Redis work is bounded by the number of
configured queues or by one page of jobs, never by the size of a queue:

- counts are ``ZCARD`` (O(1)); a page is one ``ZRANGE`` by index (O(log N + page)),
  then one ``HMGET`` per hash for the page's tags only (O(page));
- nothing uses ``KEYS``, ``SCAN``, ``HGETALL`` of a per-job hash, or a script that
  walks a collection; the only script is ``info.lua`` (one job, O(log N));
- reads of one page go out in at most two pipelined round trips.

Key names come from :attr:`Queue.keys <django_zqueue.queue.Queue.keys>`. The parsing of
the per-minute ring and of the workers hash mirrors :meth:`Queue.minutes` and
:meth:`Queue.live_threads` (the tests check they agree), so that a whole overview is one
pipeline instead of several round trips per queue.

No Django views here: :mod:`django_zqueue.admin` renders what these functions return.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from django.utils import timezone

from .connection import is_cluster, server_time_ms, unavailable_as_error
from .exceptions import InvalidArgument
from .queue import MAX_MERGED, MAX_TAG_BYTES, JobInfo, Queue, live_thread_count, minute_rows
from .queue import SERIES as SERIES  # the per-minute series of the stats ring

#: tabs of the queue page: state -> the ZSET that holds it
TABS = ("ready", "delayed", "leased", "dead")
#: a worker entry older than this no longer counts (as Queue.live_threads' default)
WORKER_WITHIN_MS = 30_000
MAX_PER_PAGE = 200
#: page numbers are clamped to this, so offsets stay within Redis' integers
MAX_PAGE = 10**9
#: the first line of an error is cut to this many characters in lists
ERROR_LINE_CHARS = 300


def _s(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _ms_dt(ms: float) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _redis_ms(reply: Any) -> int:
    secs, micros = reply
    return int(secs) * 1000 + int(micros) // 1000


def _timed_pipeline(client: Any, key: str, transaction: bool = False) -> tuple[Any, int | None]:
    """A pipeline whose first command is ``TIME``. A cluster pipeline takes no ``TIME``
    (nor does a cluster transaction): there the time of ``key``'s node is read first, on
    its own, and returned; :func:`_execute_timed` puts it in front of the replies."""
    pipe = client.pipeline(transaction=transaction)
    if is_cluster(client):
        return pipe, server_time_ms(client, key)
    pipe.time()
    return pipe, None


def _execute_timed(pipe: Any, now_ms: int | None) -> tuple[int, list[Any]]:
    """(Redis time in ms, replies with the ``TIME`` reply first) of a timed pipeline."""
    replies = list(pipe.execute())
    if now_ms is None:
        return _redis_ms(replies[0]), replies
    return now_ms, [None, *replies]


def _json(raw: Any) -> Any:
    if raw is None or raw in (b"", ""):
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def format_score(score: float | None) -> str:
    """A ready score as an exact decimal string (integral scores without ``.0``)."""
    if score is None:
        return ""
    if math.isfinite(score) and score == int(score) and abs(score) < 2**63:
        return str(int(score))
    return repr(score)


def duration(seconds: float | None) -> str:
    """Seconds as a short human duration: ``850 ms``, ``42 s``, ``3 min 5 s``, ``2 h 4 min``,
    ``3 d 4 h``; '' for None. Negative values are shown as their absolute value."""
    if seconds is None:
        return ""
    s = abs(seconds)
    if s < 1:
        return f"{int(s * 1000)} ms"
    if s < 60:
        return f"{int(s)} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60)} s"
    if s < 86400:
        return f"{int(s // 3600)} h {int(s % 3600 // 60)} min"
    return f"{int(s // 86400)} d {int(s % 86400 // 3600)} h"


def local_text(dt: datetime | None) -> str:
    """``YYYY-MM-DD HH:MM:SS`` in the current time zone ('' for None): what the admin's
    ``|date`` filter would show, at a fraction of its cost on a page of 200 rows."""
    return "" if dt is None else timezone.localtime(dt).strftime("%Y-%m-%d %H:%M:%S")


def task_name(body: Any) -> str | None:
    """The task of a task-layer body ``{"task": name, "args": ..., "kwargs": ...}``."""
    if isinstance(body, dict) and isinstance(body.get("task"), str):
        return str(body["task"])
    return None


def arguments(body: Any) -> str:
    """A job's arguments as indented JSON: ``args``/``kwargs`` of a task, else the body."""
    if isinstance(body, dict) and "task" in body:
        shown: Any = {k: v for k, v in body.items() if k != "task"}
    else:
        shown = body
    if isinstance(shown, str):
        return shown
    return json.dumps(shown, indent=2, ensure_ascii=False, default=str)


def first_line(text: str | None) -> str | None:
    if not text or not text.strip():
        return None
    line = text.strip().splitlines()[0]
    return line[:ERROR_LINE_CHARS] + ("…" if len(line) > ERROR_LINE_CHARS else "")


def _live_threads(raw: dict[Any, Any], now_ms: int) -> int:
    """As :meth:`Queue.live_threads`: threads of the entries seen in the last 30 s.

    ``seen`` is the worker's clock, compared with this host's clock as the queue does."""
    return live_thread_count(raw, now_ms - WORKER_WITHIN_MS)


# ---------------------------------------------------------------- the minute series


@dataclass(frozen=True, slots=True)
class Minute:
    """One minute of the stats ring (as a row of :meth:`Queue.minutes`)."""

    minute: int  # minutes since the epoch, Redis time
    enqueued: int
    acked: int
    failed: int
    dead: int
    run_ms: int
    ready: int  # depth sampled in that minute (-1: none taken); the current minute: now

    @property
    def start(self) -> datetime:
        return _ms_dt(self.minute * 60_000)


def minutes_from_stats(
    fields: dict[str, int], now_ms: int, last: int = 60, ready_now: int | None = None
) -> list[Minute]:
    """The last ``last`` minutes, oldest first, from the decoded stats hash (the current
    minute's depth is ``ready_now`` when given)."""
    return [Minute(**row) for row in minute_rows(fields, now_ms // 60_000, last, ready_now)]


def _stats_fields(raw: dict[Any, Any]) -> dict[str, int]:
    out = {}
    for k, v in raw.items():
        try:
            out[_s(k)] = int(v)
        except ValueError:
            continue
    return out


def _counters(fields: dict[str, int]) -> dict[str, int]:
    """The lifetime counters of a stats hash (the fields whose name ends in no digit)."""
    return {k: v for k, v in fields.items() if not k[-1:].isdigit()}


# ---------------------------------------------------------------- chart


@dataclass(frozen=True, slots=True)
class Line:
    name: str
    css: str  # class of the SVG element: zq-line-<css>
    points: str  # SVG polyline points, "x,y x,y ..."
    dots: list[tuple[str, str]]  # (cx, cy) of each sample
    latest: int | None


@dataclass(frozen=True, slots=True)
class Tick:
    y: str
    label: str


@dataclass(frozen=True, slots=True)
class Chart:
    """An SVG line chart, every coordinate already formatted (no localisation in templates)."""

    title: str
    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int
    lines: list[Line]
    ticks: list[Tick]
    xticks: list[tuple[str, str]]  # (x, label)
    empty: bool
    latest_note: str  # what the figures in the legend are


def nice_ceiling(value: float) -> int:
    """The smallest of 1, 2, 5 x 10^k that is >= value (at least 1)."""
    if value <= 1:
        return 1
    exp = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * exp >= value:
            return int(step * exp)
    return int(10 * exp)  # pragma: no cover - unreachable


def _fmt(x: float) -> str:
    return f"{x:.1f}"


def line_chart(
    title: str,
    series: Sequence[tuple[str, str, Sequence[int | None]]],
    *,
    dots: bool = False,
    latest_index: int = -1,
    latest_note: str = "now",
    width: int = 600,
    height: int = 150,
) -> Chart:
    """Polylines for ``series`` of (name, css class, values), one value per minute; a
    None value is a gap that the line bridges (no sample that minute). The legend shows
    each series' value at ``latest_index`` (or the last sample before it)."""
    left, right, top, bottom = 48, width - 8, 8, height - 20
    n = max((len(v) for _, _, v in series), default=0)
    peak = max((x for _, _, vs in series for x in vs if x is not None), default=0)
    ymax = nice_ceiling(peak)

    def xy(i: int, v: int) -> tuple[str, str]:
        x = left + (right - left) * (i / max(1, n - 1))
        y = bottom - (bottom - top) * (v / ymax)
        return _fmt(x), _fmt(y)

    lines = []
    for name, css, values in series:
        pts = [xy(i, v) for i, v in enumerate(values) if v is not None]
        present = [v for v in list(values)[: latest_index + 1 or None] if v is not None]
        lines.append(
            Line(
                name=name,
                css=css,
                points=" ".join(f"{x},{y}" for x, y in pts),
                dots=pts if dots else [],
                latest=present[-1] if present else None,
            )
        )
    ticks = [
        Tick(y=_fmt(bottom - (bottom - top) * f), label=str(int(ymax * f))) for f in (0, 0.5, 1)
    ]
    if ymax == 1:
        ticks = [ticks[0], ticks[2]]
    xticks = []
    for back in (60, 45, 30, 15, 0):
        if back < n:
            i = n - 1 - back
            label = "now" if back == 0 else f"-{back} min"
            xticks.append((_fmt(left + (right - left) * (i / max(1, n - 1))), label))
    return Chart(
        title=title,
        width=width,
        height=height,
        left=left,
        right=right,
        top=top,
        bottom=bottom,
        lines=lines,
        ticks=ticks,
        xticks=xticks,
        empty=peak == 0,
        latest_note=latest_note,
    )


# ---------------------------------------------------------------- overview


@dataclass(frozen=True, slots=True)
class QueueSummary:
    name: str
    ready: int
    delayed: int
    inflight: int
    dead: int
    lag_seconds: float | None  # now - enqueued at of the job at rank 0; None when empty
    workers: int  # live worker threads
    counters: dict[str, int]  # lifetime counters (enqueued, acked, failed, retried, ...)
    minutes: list[Minute]  # oldest first
    now_ms: int  # Redis time of the snapshot

    @property
    def last_minute(self) -> Minute:
        """The last complete minute (the one before the current one)."""
        return self.minutes[-2] if len(self.minutes) > 1 else self.minutes[-1]

    @property
    def lag(self) -> str:
        return duration(self.lag_seconds)

    def depth_chart(self) -> Chart:
        depth: list[int | None] = [m.ready if m.ready >= 0 else None for m in self.minutes]
        depth[-1] = self.ready  # the current depth is known exactly
        return line_chart("Jobs waiting (ready)", [("ready", "ready", depth)], dots=True)

    def throughput_chart(self) -> Chart:
        return line_chart(
            "Jobs per minute",
            [
                ("enqueued", "enqueued", [m.enqueued for m in self.minutes]),
                ("acked", "acked", [m.acked for m in self.minutes]),
                ("failed", "failed", [m.failed for m in self.minutes]),
            ],
            latest_index=-2,
            latest_note="last complete minute",
        )


def _by_client(queues: Sequence[Queue]) -> dict[int, list[Queue]]:
    groups: dict[int, list[Queue]] = {}
    for q in queues:
        groups.setdefault(id(q.client), []).append(q)
    return groups


def overview(queues: Sequence[Queue], last: int = 60) -> list[QueueSummary]:
    """A summary of each queue: counts, lag, live workers, counters and ``last`` minutes.

    Two pipelined round trips per Redis client whatever the queues hold: ``TIME``, then
    per queue four ``ZCARD``, ``HGETALL`` of the stats hash (bounded: the counters and a
    64-slot ring) and of the workers hash (one field per worker), and ``ZRANGE ready 0
    0``; then one ``HGET`` of the record of each queue's first job.
    """
    if not 1 <= last <= 63:
        raise InvalidArgument("last must be in [1, 63]")
    out: dict[str, QueueSummary] = {}
    for q in queues:
        if q.partitions > 1:
            out[q.name] = _partitioned_summary(q, last)
    for group in _by_client([q for q in queues if q.partitions == 1]).values():
        client = group[0].client
        with unavailable_as_error():
            pipe, now = _timed_pipeline(client, group[0].keys.ready)
            for q in group:
                k = q.keys
                for key in (k.ready, k.delayed, k.leased, k.dead):
                    pipe.zcard(key)
                pipe.hgetall(k.stats)
                pipe.hgetall(k.workers)
                pipe.zrange(k.ready, 0, 0)
            now_ms, replies = _execute_timed(pipe, now)
            rows = [replies[1 + 7 * i : 8 + 7 * i] for i in range(len(group))]
            firsts = [(q, row[6][0]) for q, row in zip(group, rows, strict=True) if row[6]]
            metas: dict[str, Any] = {}
            if firsts:
                pipe = client.pipeline(transaction=False)
                for q, tag in firsts:
                    pipe.hget(q.keys.meta, tag)
                metas = {q.name: _json(m) for (q, _), m in zip(firsts, pipe.execute(), strict=True)}
        local_ms = int(time.time() * 1000)
        for q, row in zip(group, rows, strict=True):
            ready, delayed, inflight, dead, stats_raw, workers_raw, _ = row
            fields = _stats_fields(stats_raw)
            meta = metas.get(q.name)
            lag = None
            if isinstance(meta, dict) and "e" in meta:
                lag = max(0.0, (now_ms - int(meta["e"])) / 1000)
            out[q.name] = QueueSummary(
                name=q.name,
                ready=int(ready),
                delayed=int(delayed),
                inflight=int(inflight),
                dead=int(dead),
                lag_seconds=lag,
                workers=_live_threads(workers_raw, local_ms),
                counters=_counters(fields),
                minutes=minutes_from_stats(fields, now_ms, last, int(ready)),
                now_ms=now_ms,
            )
    return [out[q.name] for q in queues]


def _partitioned_summary(q: Queue, last: int) -> QueueSummary:
    """The summary of a partitioned queue: the sums over its partitions (counts, stats
    and minute ring), the lag of the first job in global order. A few round trips, each
    O(partitions)."""
    counts = q.counts()
    first = q.merged_page("ready", 0, 1)
    with unavailable_as_error():
        fields = q.read.stats_fields()
        pipe, now = _timed_pipeline(q.client, q.keys.workers)
        pipe.hgetall(q.keys.workers)
        if first:
            tag, _, p = first[0]
            pipe.hget(q.part_keys[p].meta, tag)
        now_ms, replies = _execute_timed(pipe, now)
    meta = _json(replies[2]) if first else None
    lag = None
    if isinstance(meta, dict) and "e" in meta:
        lag = max(0.0, (now_ms - int(meta["e"])) / 1000)
    return QueueSummary(
        name=q.name,
        ready=counts["ready"],
        delayed=counts["delayed"],
        inflight=counts["inflight"],
        dead=counts["dead"],
        lag_seconds=lag,
        workers=_live_threads(replies[1], int(time.time() * 1000)),
        counters=_counters(fields),
        minutes=minutes_from_stats(fields, now_ms, last),
        now_ms=now_ms,
    )


# ---------------------------------------------------------------- one queue, one page


@dataclass(frozen=True, slots=True)
class JobRow:
    """One job in a list. Fields that don't apply to the list's state are None."""

    tag: str
    state: str
    score: float  # the job's score in its state's ZSET
    rank: int | None = None  # ready: position in line
    priority: int | None = None
    task: str | None = None
    enqueued_at: datetime | None = None
    attempts: int | None = None
    max_retries: int | None = None
    eta_seconds: float | None = None  # ready: estimated seconds until it has run
    run_at: datetime | None = None  # delayed
    consumer: str | None = None  # leased
    started_at: datetime | None = None  # leased: last claim
    lease_deadline: datetime | None = None  # leased
    progress: float | None = None  # leased: 0.0-1.0
    progress_note: str | None = None
    died_at: datetime | None = None  # dead
    error: str | None = None  # dead: first line of the last error (with payload only)
    gone: bool = False  # the job left its state between the two reads
    now_ms: int = 0

    @property
    def score_text(self) -> str:
        return format_score(self.score)

    @property
    def quoted_tag(self) -> str:
        """The tag for a query string."""
        return quote(self.tag, safe="")

    @property
    def enqueued_text(self) -> str:
        return local_text(self.enqueued_at)

    @property
    def when_text(self) -> str:
        """Run-at (delayed), lease deadline (leased) or time of death (dead)."""
        return local_text(self.run_at or self.lease_deadline or self.died_at)

    @property
    def started_text(self) -> str:
        return local_text(self.started_at)

    @property
    def progress_percent(self) -> int | None:
        return None if self.progress is None else round(self.progress * 100)

    @property
    def waiting(self) -> str:
        """How long since it was enqueued."""
        if self.enqueued_at is None:
            return ""
        return duration(self.now_ms / 1000 - self.enqueued_at.timestamp())

    @property
    def eta(self) -> str:
        return duration(self.eta_seconds)

    @property
    def due_in(self) -> str:
        """Delayed: time until run-at; leased: until the lease deadline (negative: past)."""
        when = self.run_at or self.lease_deadline
        if when is None:
            return ""
        delta = when.timestamp() - self.now_ms / 1000
        return ("in " if delta >= 0 else "overdue by ") + duration(delta)

    @property
    def overdue(self) -> bool:
        """Leased: the lease deadline has passed (scan has not recovered it yet)."""
        return (
            self.lease_deadline is not None and self.lease_deadline.timestamp() * 1000 < self.now_ms
        )

    @property
    def attempts_text(self) -> str:
        if self.attempts is None:
            return ""
        return f"{self.attempts} of {(self.max_retries or 0) + 1}"


@dataclass(frozen=True, slots=True)
class Page:
    queue: str
    state: str
    counts: dict[str, int]
    rows: list[JobRow]
    number: int  # 1-based
    per_page: int
    now_ms: int
    workers: int = 0
    mean_run_ms: float | None = None  # from the lifetime counters
    max_pages: int | None = None  # a partitioned queue lists its first MAX_MERGED jobs

    @property
    def total(self) -> int:
        return self.counts[self.state]

    @property
    def pages(self) -> int:
        pages = max(1, math.ceil(self.total / self.per_page))
        return pages if self.max_pages is None else min(pages, self.max_pages)

    @property
    def offset(self) -> int:
        return (self.number - 1) * self.per_page

    @property
    def first_item(self) -> int:
        return self.offset + 1 if self.rows else 0

    @property
    def last_item(self) -> int:
        return self.offset + len(self.rows)


def page(q: Queue, state: str, number: int = 1, per_page: int = 50, *, payload: bool) -> Page:
    """One page of the jobs of ``q`` in ``state``.

    ``ready`` is in rank order (rank = offset + index), ``delayed`` by run-at,
    ``leased`` by lease deadline, ``dead`` most recent death first. A page number past
    the end gives the last page. Error text is read only when ``payload`` is true.

    Two round trips: ``TIME``, four ``ZCARD``, the page's ``ZRANGE`` and, for ready
    jobs, ``HMGET stats acked run_ms`` and ``HGETALL workers`` (for the ETA); then one
    ``HMGET`` per hash the page needs (meta and body; progress for leased jobs; errors
    for dead ones, with payload), for the page's tags only.
    """
    if state not in TABS:
        raise InvalidArgument(f"state must be one of {', '.join(TABS)}")
    if not 1 <= per_page <= MAX_PER_PAGE:
        raise InvalidArgument(f"per_page must be in [1, {MAX_PER_PAGE}]")
    number = min(max(1, number), MAX_PAGE)
    if q.partitions > 1:
        return _partitioned_page(q, state, number, per_page, payload=payload)
    k = q.keys
    zset = {"ready": k.ready, "delayed": k.delayed, "leased": k.leased, "dead": k.dead}[state]
    with unavailable_as_error():
        # counts and page from one snapshot (one slot: a transaction on a cluster too)
        pipe, now = _timed_pipeline(q.client, k.ready, transaction=True)
        for key in (k.ready, k.delayed, k.leased, k.dead):
            pipe.zcard(key)
        start = (number - 1) * per_page
        if state == "dead":
            pipe.zrevrange(zset, start, start + per_page - 1, withscores=True)
        else:
            pipe.zrange(zset, start, start + per_page - 1, withscores=True)
        if state == "ready":
            pipe.hmget(k.stats, ["acked", "run_ms"])
            pipe.hgetall(k.workers)
        now_ms, replies = _execute_timed(pipe, now)
        counts = dict(zip(TABS, (int(c) for c in replies[1:5]), strict=True))
        members: list[tuple[bytes, float]] = replies[5]
        total = counts[state]
        last_page = max(1, math.ceil(total / per_page))
        if not members and number > last_page:  # past the end: show the last page
            return page(q, state, last_page, per_page, payload=payload)
        tags = [m for m, _ in members]
        hashes = [k.meta, k.body]
        if state == "leased":
            hashes.append(k.progress)
        if state == "dead" and payload:
            hashes.append(k.errors)
        values: list[list[Any]] = []
        if tags:
            pipe = q.client.pipeline(transaction=False)
            for key in hashes:
                pipe.hmget(key, tags)
            values = pipe.execute()
    workers = 0
    mean_run_ms = None
    if state == "ready":
        acked, run_ms = (int(x or 0) for x in replies[6])
        mean_run_ms = run_ms / acked if acked else None
        workers = _live_threads(replies[7], int(time.time() * 1000))
    return _page(
        q,
        state,
        number,
        per_page,
        counts,
        members,
        values,
        now_ms,
        workers,
        mean_run_ms,
        payload=payload,
    )


def _partitioned_page(q: Queue, state: str, number: int, per_page: int, *, payload: bool) -> Page:
    """:func:`page` for a partitioned queue: the partitions' pages merged in global
    order (:meth:`Queue.merged_page`). Only the first ``MAX_MERGED`` jobs of a state
    can be listed; a later page number gives the last reachable page. Round trips: the
    counts, ``TIME`` and the merged page; one ``HMGET`` per hash and partition of the
    page; for ready jobs the partitions' stats and the workers hash."""
    max_pages = max(1, MAX_MERGED // per_page)
    counts = q.counts()
    counts = {
        "ready": counts["ready"],
        "delayed": counts["delayed"],
        "leased": counts["inflight"],
        "dead": counts["dead"],
    }
    last_page = min(max_pages, max(1, math.ceil(counts[state] / per_page)))
    number = min(number, last_page)
    entries = q.merged_page(state, (number - 1) * per_page, per_page)
    hashes = ["meta", "body"]
    if state == "leased":
        hashes.append("progress")
    if state == "dead" and payload:
        hashes.append("errors")
    by_part: dict[int, list[str]] = {}
    for tag, _, p in entries:
        by_part.setdefault(p, []).append(tag)
    with unavailable_as_error():
        pipe, now = _timed_pipeline(q.client, q.keys.workers)
        for p, tags in by_part.items():
            for name in hashes:
                pipe.hmget(getattr(q.part_keys[p], name), tags)
        now_ms, replies = _execute_timed(pipe, now)
        found: dict[tuple[int, str], list[Any]] = {}
        i = 1
        for p, tags in by_part.items():
            for tag_index, tag in enumerate(tags):
                found[(p, tag)] = [replies[i + h][tag_index] for h in range(len(hashes))]
            i += len(hashes)
        values = [[found[(p, tag)][h] for tag, _, p in entries] for h in range(len(hashes))]
        workers = 0
        mean_run_ms = None
        if state == "ready":
            fields = q.read.stats_fields()
            acked, run_ms = fields.get("acked", 0), fields.get("run_ms", 0)
            mean_run_ms = run_ms / acked if acked else None
            workers = _live_threads(q.client.hgetall(q.keys.workers), int(time.time() * 1000))
    members = [(tag.encode("utf-8"), score) for tag, score, _ in entries]
    return _page(
        q,
        state,
        number,
        per_page,
        counts,
        members,
        values,
        now_ms,
        workers,
        mean_run_ms,
        max_pages=max_pages,
        payload=payload,
    )


def _page(
    q: Queue,
    state: str,
    number: int,
    per_page: int,
    counts: dict[str, int],
    members: list[tuple[bytes, float]],
    values: list[list[Any]],
    now_ms: int,
    workers: int,
    mean_run_ms: float | None,
    max_pages: int | None = None,
    *,
    payload: bool,
) -> Page:
    """The page's rows, from the members of the state's set and the values of the
    hashes read for them (meta, body, then progress or errors)."""
    rows = []
    for i, (tag_raw, score) in enumerate(members):
        meta = _json(values[0][i])
        body = _json(values[1][i])
        extra = values[2][i] if len(values) > 2 else None
        row: dict[str, Any] = {"tag": _s(tag_raw), "state": state, "score": float(score)}
        row["now_ms"] = now_ms
        if not isinstance(meta, dict):
            rows.append(JobRow(**row, gone=True))
            continue
        row.update(
            priority=int(meta.get("p", 0)),
            task=task_name(body),
            enqueued_at=_ms_dt(meta["e"]) if "e" in meta else None,
            attempts=int(meta.get("a", 0)),
            max_retries=int(meta.get("m", 0)),
        )
        if state == "ready":
            rank = (number - 1) * per_page + i
            row["rank"] = rank
            if mean_run_ms is not None:
                row["eta_seconds"] = (rank + 1) * mean_run_ms / 1000 / max(1, workers)
        elif state == "delayed":
            row["run_at"] = _ms_dt(score)
        elif state == "leased":
            row.update(
                consumer=meta.get("c"),
                started_at=_ms_dt(meta["st"]) if "st" in meta else None,
                lease_deadline=_ms_dt(score),
            )
            prog = _json(extra)
            if isinstance(prog, dict) and isinstance(prog.get("v"), int | float):
                row["progress"] = min(1.0, max(0.0, float(prog["v"])))
                row["progress_note"] = str(prog.get("n") or "") or None
        elif state == "dead":
            row["died_at"] = _ms_dt(score)
            if payload and extra:
                row["error"] = first_line(_s(extra))
        rows.append(JobRow(**row))
    return Page(
        queue=q.name,
        state=state,
        counts=counts,
        rows=rows,
        number=number,
        per_page=per_page,
        now_ms=now_ms,
        workers=workers,
        mean_run_ms=mean_run_ms,
        max_pages=max_pages,
    )


# ---------------------------------------------------------------- search


@dataclass(frozen=True, slots=True)
class Location:
    queue: str
    tag: str
    state: str  # ready | delayed | leased | dead | orphan
    score: float | None
    rank: int | None

    @property
    def score_text(self) -> str:
        return format_score(self.score)


def valid_tag(tag: str) -> bool:
    return 0 < len(tag.encode("utf-8")) <= MAX_TAG_BYTES


def locate(queues: Sequence[Queue], tag: str) -> list[Location]:
    """Where job ``tag`` is, in each of ``queues`` that has it: state, score and rank.

    One pipelined round trip per Redis client: per queue, ``ZSCORE`` in each of the four
    sets, ``ZRANK`` in ready and ``HEXISTS`` of the record (O(log N) each). An invalid
    tag (empty, or longer than 256 bytes) is found nowhere.
    """
    if not valid_tag(tag):
        return []
    found: dict[str, Location] = {}
    for q in queues:
        if q.partitions > 1:  # the job's partition, read directly; the global rank
            info = q.info(tag, with_body=False)
            if info is not None:
                score = {
                    "ready": info.score,
                    "delayed": info.run_at,
                    "leased": info.lease_deadline,
                    "dead": info.died_at,
                }.get(info.state)
                found[q.name] = Location(
                    q.name,
                    tag,
                    info.state,
                    score.timestamp() * 1000 if isinstance(score, datetime) else score,
                    info.rank,
                )
    for group in _by_client([q for q in queues if q.partitions == 1]).values():
        with unavailable_as_error():
            pipe = group[0].client.pipeline(transaction=False)
            for q in group:
                k = q.keys
                for key in (k.ready, k.delayed, k.leased, k.dead):
                    pipe.zscore(key, tag)
                pipe.zrank(k.ready, tag)
                pipe.hexists(k.meta, tag)
            replies = pipe.execute()
        for i, q in enumerate(group):
            scores = replies[6 * i : 6 * i + 4]
            rank, has_record = replies[6 * i + 4], replies[6 * i + 5]
            for state, score in zip(TABS, scores, strict=True):
                if score is not None:
                    found[q.name] = Location(
                        q.name,
                        tag,
                        state,
                        float(score),
                        int(rank) if state == "ready" and rank is not None else None,
                    )
                    break
            else:
                if has_record:
                    found[q.name] = Location(q.name, tag, "orphan", None, None)
    return [found[q.name] for q in queues if q.name in found]


# ---------------------------------------------------------------- one job


@dataclass(frozen=True, slots=True)
class JobDetail:
    info: JobInfo
    task: str | None
    arguments: str | None  # None: hidden (no payload permission)
    last_error: str | None  # None: none, or hidden
    error_hidden: bool
    eta_seconds: float | None
    now_ms: int

    @property
    def score_text(self) -> str:
        return format_score(self.info.score)

    @property
    def eta(self) -> str:
        return duration(self.eta_seconds)

    @property
    def waiting(self) -> str:
        return duration(self.now_ms / 1000 - self.info.enqueued_at.timestamp())

    @property
    def progress_value(self) -> float | None:
        p = self.info.progress
        if isinstance(p, dict) and isinstance(p.get("v"), int | float):
            return min(1.0, max(0.0, float(p["v"])))
        return None

    @property
    def progress_percent(self) -> int | None:
        v = self.progress_value
        return None if v is None else round(v * 100)

    @property
    def progress_note(self) -> str | None:
        p = self.info.progress
        return str(p.get("n") or "") or None if isinstance(p, dict) else None

    @property
    def progress_at(self) -> datetime | None:
        p = self.info.progress
        return _ms_dt(p["t"]) if isinstance(p, dict) and isinstance(p.get("t"), int) else None

    @property
    def due_in(self) -> str:
        when = self.info.run_at or self.info.lease_deadline
        if when is None:
            return ""
        delta = when.timestamp() - self.now_ms / 1000
        return ("in " if delta >= 0 else "overdue by ") + duration(delta)

    @property
    def attempts_text(self) -> str:
        return f"{self.info.attempts} of {self.info.max_retries + 1}"


def job(q: Queue, tag: str, *, payload: bool) -> JobDetail | None:
    """Everything about one job (:meth:`Queue.info`), with arguments and error text only
    when ``payload`` is true. None when there is no such job (or the tag is invalid).

    Two round trips: the read-only ``info`` script (O(log N)), then ``TIME``,
    ``HMGET stats acked run_ms`` and ``HGETALL workers`` for the ETA."""
    if not valid_tag(tag):
        return None
    info = q.info(tag, with_body=True)
    if info is None:
        return None
    with unavailable_as_error():
        pipe, now = _timed_pipeline(q.client, q.keys.stats)
        if q.partitions > 1:
            fields = q.read.stats_fields()
            pipe.hgetall(q.keys.workers)
            now_ms, (_, workers_raw) = _execute_timed(pipe, now)
            acked, run_ms = fields.get("acked", 0), fields.get("run_ms", 0)
        else:
            pipe.hmget(q.keys.stats, ["acked", "run_ms"])
            pipe.hgetall(q.keys.workers)
            now_ms, (_, (acked, run_ms), workers_raw) = _execute_timed(pipe, now)
    eta = None
    if info.rank is not None and acked and int(acked):
        threads = max(1, _live_threads(workers_raw, int(time.time() * 1000)))
        eta = (info.rank + 1) * int(run_ms or 0) / int(acked) / 1000 / threads
    return JobDetail(
        info=info,
        task=task_name(info.body),
        arguments=arguments(info.body) if payload else None,
        last_error=info.last_error if payload else None,
        error_hidden=bool(info.last_error) and not payload,
        eta_seconds=eta,
        now_ms=now_ms,
    )


@dataclass(frozen=True)
class ScheduleRow:
    name: str
    queue: str
    task: str
    every: str
    paused: bool
    next_at: datetime | None
    last_at: datetime | None
    last_job: str | None
    last_job_state: str | None  # ready | delayed | leased | dead | None (gone: finished)


def schedules(queues: Sequence[Queue]) -> list[ScheduleRow]:
    """Periodic schedules of ``queues`` with next and last firing and the last job's state.

    Per queue: one HGETALL of the definitions, then one pipeline of ZSCORE + HGET per
    schedule and one state read per last job: O(schedules), never O(jobs)."""
    rows: list[ScheduleRow] = []
    for q in queues:
        with unavailable_as_error():
            defs: Any = q.client.hgetall(q.sched_keys.sched_defs)
            if not defs:
                continue
            names = sorted(k.decode() for k in defs)
            pipe = q.client.pipeline(transaction=False)
            for name in names:
                pipe.zscore(q.sched_keys.sched, name)
                pipe.hget(q.sched_keys.sched_last, name)
            replies = pipe.execute()
            lasts = [r.decode().split(" ", 1)[1] if r else None for r in replies[1::2]]
            batch = q.batch()
            pending = [batch.add(q.shards[0].state(job)) for job in lasts if job]
            batch.send()
            states = iter([p.result() for p in pending])
        for name, nxt, job in zip(names, replies[0::2], lasts, strict=True):
            definition = json.loads(defs[name.encode()])
            state = next(states) if job else None
            rows.append(
                ScheduleRow(
                    name=name,
                    queue=q.name,
                    task=definition.get("task", ""),
                    every=definition.get("cron") or f"every {definition.get('interval')} s",
                    paused=bool(definition.get("paused")),
                    next_at=_dt(nxt) if nxt is not None else None,
                    last_at=_dt(int(job.rsplit(":", 1)[1])) if job else None,
                    last_job=job,
                    last_job_state=state,
                )
            )
    return rows


def _dt(ms: float) -> datetime:
    return datetime.fromtimestamp(float(ms) / 1000, tz=UTC)
