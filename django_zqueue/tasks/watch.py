"""A job's position in line for the people who wait on it: signed tokens, and one shared
poll of Redis per queue per process, however many watch.

A site shows a person where their job stands through :mod:`django_zqueue.web.position`
(views, template tag). This module holds what those views need below the admin layer:

- :func:`make_token` / :func:`read_token`: a job is named by a token signed with Django's
  ``SECRET_KEY`` (``django.core.signing``), carrying the queue, the tag, an expiry and,
  optionally, the user it was made for. A bare id is never accepted, so jobs cannot be
  enumerated, and a forged or expired token reads as "no such job".
- :class:`Watch`: the jobs watched in one queue. Every watcher waits on it; whichever
  watcher finds the last read older than :data:`INTERVAL` reads *every* watched job of the
  queue in one round trip (``positions.lua``, up to 500 jobs per call, plus the run-time
  counters and the workers hash for the ETA), and wakes the others. 1,000 watchers of one
  queue cost one round trip per :data:`INTERVAL`, not 1,000. No thread runs when nobody
  watches.

A :class:`Position` says only the job's state, rank and ETA: never its payload, task
or error.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.core import signing
from django.urls import reverse

from .. import read
from ..engine.keys import partition_of
from ..engine.records import Progress, decode_json
from ..engine.scripts import MAX_POSITIONS, Standing
from ..exceptions import InvalidArgument
from ..queue import get_queue
from ..queue.durable_calls import ParkedFor

if TYPE_CHECKING:
    from ..queue import Queue

SALT = "django_zqueue.web.position"
#: default lifetime of a position token: one day
DEFAULT_MAX_AGE = 86_400
#: a position is read again at most this often (seconds), for all watchers of a queue
INTERVAL = 1.0
#: a watcher that joins with nothing read yet waits at most this long for a read
FIRST_READ_GAP = 0.1
#: what a person sees of each state
STATUS = {
    "ready": "waiting",
    "delayed": "scheduled",
    "waiting": "scheduled",  # for its parents (a workflow): it joins the line later
    "leased": "running",
    "dead": "failed",
    "expired": "expired",  # not started before its expiry: it will not run
    "": "done",  # or cancelled, when its cancel record is kept (see read_positions)
}
#: the statuses after which nothing changes: the widget stops asking (``expired``: a
#: job dropped unrun past its deadline, shown like a cancelled one)
FINAL = ("done", "failed", "cancelled", "expired", "gone")
#: tokens longer than this are refused before they are checked
MAX_TOKEN_CHARS = 400


@dataclass(frozen=True, slots=True)
class Target:
    """What a valid token names: a job of a queue, and the user it was made for (None:
    anyone holding the token)."""

    queue: str
    tag: str
    user: str | None


def make_token(queue: str, tag: str, *, user: Any = None, max_age: int = DEFAULT_MAX_AGE) -> str:
    """A signed token naming job ``tag`` of ``queue`` for ``max_age`` seconds; with
    ``user`` (a user object or its primary key) only that user may read it."""
    if not 1 <= max_age <= 366 * 86_400:
        raise InvalidArgument("max_age must be in [1, 31622400] seconds")
    pk = getattr(user, "pk", user)
    payload = {"q": queue, "j": tag, "x": int(time.time()) + max_age}
    if pk is not None:
        payload["u"] = str(pk)
    return signing.dumps(payload, salt=SALT, compress=False)


def read_token(token: str) -> Target | None:
    """The job a token names, or None when the token is malformed, forged or expired."""
    if not token or len(token) > MAX_TOKEN_CHARS:
        return None
    try:
        payload = signing.loads(token, salt=SALT)
    except signing.BadSignature:
        return None
    if not isinstance(payload, dict):
        return None
    queue, tag, expires, user = (payload.get(k) for k in ("q", "j", "x", "u"))
    if not (isinstance(queue, str) and isinstance(tag, str) and isinstance(expires, int)):
        return None
    if expires < time.time() or not (user is None or isinstance(user, str)):
        return None
    return Target(queue, tag, user)


def position_url(queue: str, tag: str, *, user: Any = None, max_age: int = DEFAULT_MAX_AGE) -> str:
    """The URL of the position of job ``tag`` (``django_zqueue:position``, with a token
    from :func:`make_token`)."""
    token = make_token(queue, tag, user=user, max_age=max_age)
    return reverse("django_zqueue:position", args=[token])


@dataclass(frozen=True, slots=True)
class Position:
    """Where a job stands, as a person may see it: ``status`` (waiting, scheduled, running,
    failed, done, cancelled, expired; gone: in no set and not in the history of finished
    jobs, so not known to have run), ``rank`` (0 = next; None unless waiting),
    ``eta_seconds`` (None when unknown or no worker is live), ``read_at`` (this process'
    monotonic clock), and while running the ``progress`` (0-100) and its note as the job
    reports them (``Queue.touch``), when it does."""

    status: str
    rank: int | None
    eta_seconds: float | None
    read_at: float
    progress: int | None = None
    progress_note: str | None = None
    #: while parked by a durable sleep or wait (statuses ``sleeping``, ``waiting_for_event``):
    #: when it runs again at the latest, Unix seconds
    until: float | None = None

    @property
    def version(self) -> str:
        """Changes exactly when the status, the rank or the reported progress changes
        (not the ETA): what a long-poll waits on. The same in every process."""
        raw = f"{self.status}:{self.rank}:{self.progress}:{self.progress_note}:{self.until}"
        return hashlib.blake2s(raw.encode(), digest_size=6).hexdigest()

    def as_json(self) -> dict[str, Any]:
        eta = None if self.eta_seconds is None else round(self.eta_seconds, 1)
        return {
            "status": self.status,
            "rank": self.rank,
            "ahead": self.rank,
            "eta_seconds": eta,
            "progress": self.progress,
            "until": self.until,
            "version": self.version,
        }


def read_positions(q: Queue, tags: list[str]) -> dict[str, Position]:
    """Where each of ``tags`` stands, in one round trip (one more on a partitioned queue
    with ready jobs: their global rank; one more when some job is in no set: whether it
    was cancelled). One ``positions`` call per shard and 500 jobs, the progress of the
    shard's jobs (one HMGET), the run-time counters, the workers hash."""
    batch = q.engine.batch()
    pending, chunks = q.engine.positions.add_positions(batch, tags, MAX_POSITIONS)
    replies = q.engine.send(batch)
    standings = [s for p in pending for s in p.result()]
    tail = replies[len(pending) :]
    reported = {
        tag: Progress.of(decode_json(raw))
        for chunk, values in zip(chunks, tail, strict=False)
        for tag, raw in zip(chunk, values, strict=True)
        if raw
    }
    tail = tail[len(chunks) :]
    acked = sum(_count(a) for a, _ in tail[:-1])
    run_ms = sum(_count(r) for _, r in tail[:-1])
    workers = read.live_threads_now(tail[-1])
    ranks = _global_ranks(q, standings)
    cancelled = q.engine.results.were_cancelled([st.tag for st in standings if not st.state])
    kept = _kept(q, [st.tag for st in standings if not st.state and st.tag not in cancelled])
    parked = _parked(q, [st.tag for st in standings if st.state == "delayed"])
    mean = read.mean_run_ms(acked, run_ms)
    now = time.monotonic()
    out = {}
    for st in standings:
        rank = ranks.get(st.tag)
        eta = None if rank is None or not workers else read.eta_seconds(rank, mean, workers)
        status = "cancelled" if st.tag in cancelled else STATUS[st.state]
        if not st.state and status == "done" and st.tag not in kept:
            status = "gone"  # in no set and not in the history: it may never have run
        done = reported.get(st.tag) if status == "running" else None
        percent = None if done is None or done.value is None else round(done.value * 100)
        note = done.note if done is not None else None
        park = parked.get(st.tag)
        if park is not None:
            status = park.status
        until = park.until.timestamp() if park is not None else None
        out[st.tag] = Position(status, rank, eta, now, percent, note, until)
    return out


def _kept(q: Queue, tags: list[str]) -> set[str]:
    """Which of ``tags`` (jobs in no set, not cancelled) the history of finished jobs
    holds: they succeeded. One more round trip, only when there are such jobs."""
    if not tags:
        return set()
    shards = q.engine.reads.partitions
    entries = [(tag, partition_of(tag, shards)) for tag in tags]
    return {i.tag for i in q.engine.reads.infos(entries, with_body=False)}


def _parked(q: Queue, tags: list[str]) -> dict[str, ParkedFor]:
    """What each delayed job of ``tags`` is parked for (durable tasks), in one more round
    trip, only when there are delayed jobs."""
    return q.engine.durable.parked_many(tags)


def _count(raw: bytes | str | None) -> int:
    """A stats counter; 0 when missing or not an integer (a corrupt field: the estimate
    goes without it, ``zqueue_doctor`` names it)."""
    try:
        return int(raw or 0)
    except ValueError:
        return 0


def _global_ranks(q: Queue, standings: list[Standing]) -> dict[str, int]:
    """Rank in the whole queue of each ready job: its shard rank, plus on a partitioned
    queue the jobs of the other shards ahead of it (``ZCOUNT``, one more round trip)."""
    ready = [s for s in standings if s.rank is not None and s.score is not None]
    ahead = q.engine.positions.ahead_elsewhere(ready)
    return {s.tag: int(s.rank or 0) + n for s, n in zip(ready, ahead, strict=True)}


class Watch:
    """The watched jobs of one queue in this process, and their last read positions."""

    def __init__(self, queue: str) -> None:
        self.queue = queue
        self.cond = threading.Condition()
        self.watchers: dict[str, int] = {}  # tag -> requests waiting on it
        self.current: dict[str, Position] = {}
        self.last_read = 0.0
        self.reading = False
        self.reads = 0  # round trips made, for tests and the benchmark

    def wait(self, tag: str, after: str | None = None, timeout: float = 0.0) -> Position:
        """The position of ``tag``: as soon as it is known and its version differs from
        ``after`` (any, when None), or when ``timeout`` seconds pass (then the last known,
        possibly unchanged). Raises what a read raises (``QueueUnavailable``)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            self.watchers[tag] = self.watchers.get(tag, 0) + 1
        try:
            while True:
                tags = self._await_turn(tag, after, deadline)
                if isinstance(tags, Position):
                    return tags
                self._read(tags)
        finally:
            with self.cond:
                left = self.watchers.pop(tag) - 1
                if left:
                    self.watchers[tag] = left

    def _await_turn(self, tag: str, after: str | None, deadline: float) -> Position | list[str]:
        """Under the lock: the position to return, or the tags to read (this caller's
        turn to read for everyone)."""
        with self.cond:
            while True:
                now = time.monotonic()
                pos = self.current.get(tag)
                if pos is not None and pos.read_at < now - 3 * INTERVAL:
                    pos = None  # nobody watched it for a while: stale
                if pos is not None and (after is None or pos.version != after):
                    return pos
                if pos is not None and now >= deadline:
                    return pos
                due = self.last_read + (INTERVAL if pos is not None else FIRST_READ_GAP)
                if not self.reading and now >= due:
                    self.reading = True
                    return list(self.watchers)
                wake = deadline if self.reading else min(due, deadline)
                self.cond.wait(max(0.01, wake - now))

    def _read(self, tags: list[str]) -> None:
        fresh: dict[str, Position] = {}
        try:
            fresh = read_positions(get_queue(self.queue), tags)
        finally:
            with self.cond:
                self.reading = False
                self.last_read = time.monotonic()
                self.reads += 1
                self.current = {
                    t: p for t, p in self.current.items() if p.read_at >= self.last_read - 10
                }
                self.current.update(fresh)
                self.cond.notify_all()


_watches: dict[tuple[str, str], Watch] = {}
_watches_lock = threading.Lock()


def watch_of(queue: str) -> Watch:
    """The process' one :class:`Watch` of ``queue`` (per Redis key prefix); raises
    ``UnknownQueue`` for a queue that is not configured."""
    key = (get_queue(queue).prefix, queue)
    with _watches_lock:
        found = _watches.get(key)
        if found is None:
            found = _watches[key] = Watch(queue)
        return found
