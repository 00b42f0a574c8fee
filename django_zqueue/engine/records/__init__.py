"""A job as it crosses the layers, and the one place its Redis records are decoded.

- :class:`NewJob`: a job validated and encoded, about to be published (made by
  :meth:`Queue.prepare <django_zqueue.queue.Queue.prepare>`, sent by ``publish.lua``):
  its tag, body and :class:`~django_zqueue.engine.records.spec.JobSpec`.
- :class:`Message`: one delivery of a job to one consumer (from ``claim.lua``);
  :class:`Ack`: one to finish (``ack_many.lua``).
- :class:`JobInfo`: a consistent snapshot of one job (from ``info.lua``).
- :class:`ScanResult`, :class:`Claimed`: what a scan step and a claim call did.
- :class:`Record`, :class:`Progress`: a job's record and progress as the read side
  (:mod:`.read`) lists them, decoded leniently (a bad value reads as missing).

The job record (``meta`` hash, one JSON object per job) uses short fields: ``p`` priority,
``a`` attempts, ``m`` max retries, ``t`` delivery token, ``e`` enqueued at (ms), ``v``
the job's own lease (ms), ``st`` last claim (ms), ``c`` last consumer, ``s`` a raw score,
``g`` the group key, ``w`` the group's weight in a fair queue, ``x`` its expiry (ms);
a record kept in the history of finished jobs also has ``fa`` (ended at, ms), ``rt``
(run time, ms) and ``was`` (a cancelled job's state before). Only this module reads them
on the Python side.
"""

from __future__ import annotations

import base64
import json
import math
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple

from ...exceptions import InvalidArgument
from . import attempts
from .attempts import AttemptError
from .codec import loads, read_fields, split_kept, split_record
from .spec import DEFAULT_SPEC, JobSpec

#: what a nack did: retried, moved to dead letters, or None for a stale delivery
NackResult = Literal["retry", "dead"] | None
#: the states of a job kept in the history of finished jobs (``lua/_history.lua``)
ENDED = ("succeeded", "cancelled")


#: the times :func:`from_ms` clamps to: a day inside datetime's range, so that any time
#: zone can still show them
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, tzinfo=UTC)
_EARLIEST_MS = EARLIEST.timestamp() * 1000
_LATEST_MS = LATEST.timestamp() * 1000


def from_ms(ms: float) -> datetime:
    """An aware UTC datetime from milliseconds since the epoch; a time out of
    datetime's range is clamped (``+inf`` reads as :data:`LATEST`; ``-inf`` and NaN,
    which no score can be, as :data:`EARLIEST`), never an error."""
    if not ms >= _EARLIEST_MS:  # (NaN too)
        return EARLIEST
    if ms > _LATEST_MS:
        return LATEST
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def text(value: bytes | str) -> str:
    """A Redis reply as text."""
    return value.decode("utf-8") if isinstance(value, bytes) else value


#: one encoder for every body (``json.dumps`` with options builds one per call)
_BODY_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def encode_body(body: Any) -> bytes:
    """JSON-encode a body; ``TypeError``/``ValueError`` (``InvalidArgument``) if it can't be."""
    try:
        data = _BODY_ENCODER.encode(body)
    except ValueError as exc:  # NaN / inf, circular reference
        raise InvalidArgument(f"body is not valid JSON: {exc}") from exc
    return data.encode("utf-8")


#: random bytes per generated tag: 9 encode to 12 URL-safe characters with no padding
TAG_BYTES = 9
#: tags made per refill of the pool (one ``os.urandom`` call and one encoding for all)
_TAG_BATCH = 256
_tag_pool: list[str] = []


#: base64url with "." for "-": a tag never starts with "-" (it would read as an option on
#: a command line), and each of its 12 characters holds 6 random bits
_TAG_ALPHABET = str.maketrans("-", ".")


def _refill_tags() -> None:
    text = base64.urlsafe_b64encode(os.urandom(TAG_BYTES * _TAG_BATCH)).decode("ascii")
    width = TAG_BYTES * 4 // 3
    text = text.translate(_TAG_ALPHABET)
    _tag_pool.extend(text[i : i + width] for i in range(0, len(text), width))


def new_tag() -> str:
    """A fresh random job tag: 12 characters of ``A-Z a-z 0-9 _ .`` (72 random bits, from
    ``os.urandom``). Two jobs waiting at the same time get the same tag with odds of about
    n²/2^73 for n such jobs (10^-6 at 100 million), and then nothing is lost: the second
    publish is refused (:class:`~django_zqueue.exceptions.DuplicateJob`). Tags are drawn
    from a per-process pool made 256 at a time (one ``urandom`` call and one encoding for
    all); a forked child empties its copy, so no two processes share one. Earlier versions
    made 20 and 22 characters; those tags stay valid (a tag is any string,
    ``validate.tag``)."""
    while True:
        try:
            return _tag_pool.pop()  # atomic in CPython: threads never get the same tag
        except IndexError:
            _refill_tags()


os.register_at_fork(after_in_child=_tag_pool.clear)


class NewJob(NamedTuple):
    """A job validated and encoded, not yet sent: its tag, its encoded body and its
    options (:class:`~django_zqueue.engine.records.spec.JobSpec`);
    :func:`~django_zqueue.engine.records.spec.pack_job` makes the one script argument it
    travels in. ``drawn``: its tag is one
    :func:`new_tag` drew for it (not the caller's), so a publish of many need not look
    for clashes before it sends them (a clash is a 72-bit coincidence, and its script
    refuses it all the same)."""

    tag: str
    body: bytes
    spec: JobSpec = DEFAULT_SPEC
    drawn: bool = False


class Message(NamedTuple):
    """One delivery of a job to one consumer, valid while its lease lasts. (A NamedTuple:
    one is made per claimed job, on the worker's hot path.)

    ``token`` identifies this delivery: :meth:`Queue.ack`, :meth:`Queue.nack` and
    :meth:`Queue.touch` are rejected once the job was handed to anyone else.
    """

    queue: str
    tag: str
    body: Any
    attempt: int
    token: int
    priority: int
    max_retries: int
    enqueued_at_ms: int
    lease_deadline_ms: int
    raw_body: bytes
    visibility_timeout_ms: int | None = None  # the job's own lease length, if it has one

    @property
    def enqueued_at(self) -> datetime:
        return from_ms(self.enqueued_at_ms)

    @property
    def lease_deadline(self) -> datetime:
        return from_ms(self.lease_deadline_ms)

    @classmethod
    def from_claim(
        cls,
        queue: str,
        tag: bytes,
        raw: bytes,
        attempt: int,
        token: int,
        priority: int,
        max_retries: int,
        enqueued_at_ms: int,
        deadline: int,
        lease_ms: int,
    ) -> Message:
        """A message from one job's nine entries of a ``claim.lua`` reply (its fields
        come as integers: no record to decode)."""
        try:
            body = loads(raw) if raw else None
        except ValueError:
            body = None  # an undecodable payload: the consumer sees raw_body and body=None
        # positional, in the order of the fields: a NamedTuple made with keywords costs
        # three times as much (one per claimed job)
        return cls(
            queue,
            text(tag),
            body,
            attempt,  # integer replies come as int
            token,
            priority,
            max_retries,
            enqueued_at_ms,
            deadline,
            raw,
            lease_ms or None,  # visibility_timeout_ms: 0 is the queue's
        )


class Ack(NamedTuple):
    """A delivery to finish with an ack (see ``ack_many.lua``): ``result`` is the JSON
    text to keep for ``result_ttl_ms`` ('' = keep none); ``run_ms`` the run time to add
    to the stats (None: not measured)."""

    msg: Message
    result: str = ""
    result_ttl_ms: int = 86_400_000
    run_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Claimed:
    """What one claim call leased, and when nothing: ``hint_ms`` until a delayed job is
    due or the rate limit admits a start (-1: nothing known, wait for new work)."""

    messages: list[Message]
    hint_ms: int

    @classmethod
    def from_reply(cls, queue: str, reply: list[Any]) -> Claimed:
        """Decode a ``claim.lua`` reply: ``{hint_ms, id1, body1, attempt1, token1,
        priority1, max_retries1, enqueued_at_ms1, deadline1, lease_ms1, id2, ...}``."""
        msgs = [Message.from_claim(queue, *reply[i : i + 9]) for i in range(1, len(reply), 9)]
        return cls(msgs, int(reply[0]))


@dataclass(frozen=True, slots=True)
class JobInfo:
    """A consistent snapshot of one job (see :meth:`Queue.info`)."""

    tag: str
    queue: str
    #: ready | delayed | leased | dead | waiting | expired | orphan | succeeded | cancelled
    state: str
    rank: int | None  # position in line while ready
    score: float | None  # ready score while ready
    run_at: datetime | None  # while delayed
    lease_deadline: datetime | None  # while leased
    died_at: datetime | None  # while dead
    priority: int
    attempts: int
    max_retries: int
    enqueued_at: datetime
    started_at: datetime | None  # last claim
    consumer: str | None  # last consumer that claimed it
    last_error: str | None
    progress: dict[str, Any] | None
    body: Any
    group: str | None = None  # its group key (docs/fairness.md)
    expires_at: datetime | None = None  # not started by then, it ends "expired"
    expired_at: datetime | None = None  # while expired: when
    errors: tuple[AttemptError, ...] = ()  # its last attempts' errors, oldest first
    #: succeeded or cancelled (kept in the history of finished jobs): when it ended
    finished_at: datetime | None = None
    run_ms: int | None = None  # succeeded: its last run's time as the worker measured it
    result: Any = None  # succeeded: its kept result (decoded JSON), when one is kept
    result_kept: bool = False  # succeeded: whether a result is kept (``result`` may be None)
    was: str | None = None  # cancelled: the state the cancel took it from

    @property
    def ended_at(self) -> datetime | None:
        """When it ended: succeeded, cancelled, died or expired (None while it is live)."""
        return self.finished_at or self.died_at or self.expired_at

    @property
    def duration_ms(self) -> int | None:
        """How long its last run took: the measured run time, else from its last start to
        its end (None when it has not ended, or never started)."""
        if self.run_ms is not None:
            return self.run_ms
        end = self.finished_at or self.died_at
        if end is None or self.started_at is None or self.state == "cancelled":
            return None
        return max(0, round((end - self.started_at).total_seconds() * 1000))

    @classmethod
    def from_reply(cls, queue: str, tag: str, reply: list[Any]) -> JobInfo | None:
        """Decode an ``info.lua`` reply (None for ``{}``: no such job)."""
        if not reply:
            return None
        state_raw, score_raw, rank, meta_raw, error, progress, body, *rest = reply
        result_raw = rest[0] if rest else b""
        state = text(state_raw)
        record = Record.decode(meta_raw, kept=state in ENDED) or Record()
        sc = float(score_raw) if score_raw not in (b"", "") else None
        decoded: Any = None
        if body:
            try:
                decoded = json.loads(body)
            except ValueError:
                decoded = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        return cls(
            tag=tag,
            queue=queue,
            state=state,
            rank=int(rank) if int(rank) >= 0 else None,
            score=sc if state == "ready" else None,
            run_at=from_ms(sc) if state == "delayed" and sc is not None else None,
            lease_deadline=from_ms(sc) if state == "leased" and sc is not None else None,
            died_at=from_ms(sc) if state == "dead" and sc is not None else None,
            priority=record.priority,
            attempts=record.attempts,
            max_retries=record.max_retries,
            enqueued_at=from_ms(record.enqueued_at_ms or 0),
            started_at=record.started_at,
            consumer=record.consumer,
            last_error=attempts.last_error(error) or None,
            progress=decode_json(progress),
            body=decoded,
            group=record.group,
            expires_at=None if record.expires_at_ms is None else from_ms(record.expires_at_ms),
            expired_at=from_ms(sc) if state == "expired" and sc is not None else None,
            errors=attempts.decode(error),
            finished_at=from_ms(sc) if state in ENDED and sc is not None else None,
            run_ms=record.run_ms,
            result=decode_json(result_raw),
            result_kept=bool(result_raw),
            was=record.was,
        )


@dataclass(frozen=True, slots=True)
class ScanResult:
    promoted: int  # delayed jobs now due, moved to ready
    recovered: int  # expired leases put back in line
    buried: int  # expired leases whose attempts were spent, now dead
    trimmed: int  # dead letters (and expired jobs) removed by age or count
    more: bool  # a limit was hit: call again to finish
    expired: int = 0  # jobs whose expiry passed before they started, now "expired"

    @classmethod
    def from_reply(cls, reply: list[Any]) -> ScanResult:
        """Decode a ``scan.lua`` reply: ``{promoted, recovered, buried, trimmed, more,
        expired}``."""
        p, r, b, t, more, x = (int(x) for x in reply)
        return cls(p, r, b, t, bool(more), x)

    @classmethod
    def total(cls, results: list[ScanResult]) -> ScanResult:
        """The sum of the steps of several shards (``more`` if any has more)."""
        return cls(
            sum(x.promoted for x in results),
            sum(x.recovered for x in results),
            sum(x.buried for x in results),
            sum(x.trimmed for x in results),
            any(x.more for x in results),
            sum(x.expired for x in results),
        )


@dataclass(frozen=True, slots=True)
class Record:
    """A job's record (the ``meta`` hash) as a reader shows it (admin pages, commands).
    ``enqueued_at_ms`` is None when the record lacks it."""

    priority: int = 0
    attempts: int = 0
    max_retries: int = 0
    enqueued_at_ms: int | None = None
    started_at_ms: int | None = None
    consumer: str | None = None
    group: str | None = None
    expires_at_ms: int | None = None
    finished_at_ms: int | None = None  # a record kept in the history: when it ended
    run_ms: int | None = None  # ... that succeeded: its run time, as measured
    was: str | None = None  # ... that was cancelled: the state the cancel took it from
    ordering_key: str | None = None  # its ordering key (docs/job-control.md)

    @property
    def enqueued_at(self) -> datetime | None:
        return None if self.enqueued_at_ms is None else from_ms(self.enqueued_at_ms)

    @property
    def started_at(self) -> datetime | None:
        return None if self.started_at_ms is None else from_ms(self.started_at_ms)

    @classmethod
    def decode(cls, raw: bytes | str | None, *, kept: bool = False) -> Record | None:
        """A record from its stored value (either layout, recordcodec.py: a body it holds
        is skipped; with ``kept``, a record of the history of finished jobs); None when
        missing, neither layout, or with a field of the wrong type."""
        if raw is None or raw in (b"", ""):
            return None
        try:
            meta = split_kept(raw)[0] if kept else read_fields(raw)
        except ValueError:  # RecordError, or JSON that is not
            return None
        try:
            return cls(
                priority=int(meta.get("p", 0)),
                attempts=int(meta.get("a", 0)),
                max_retries=int(meta.get("m", 0)),
                enqueued_at_ms=int(meta["e"]) if "e" in meta else None,
                started_at_ms=int(meta["st"]) if "st" in meta else None,
                consumer=None if meta.get("c") is None else str(meta["c"]),
                group=None if meta.get("g") is None else str(meta["g"]),
                expires_at_ms=int(meta["x"]) if "x" in meta else None,
                finished_at_ms=int(meta["fa"]) if "fa" in meta else None,
                run_ms=int(meta["rt"]) if meta.get("rt") is not None else None,
                was=None if meta.get("was") is None else str(meta["was"]),
                ordering_key=None if meta.get("o") is None else str(meta["o"]),
            )
        except (TypeError, ValueError, OverflowError):  # (JSON's Infinity as an int)
            return None


@dataclass(frozen=True, slots=True)
class Progress:
    """A leased job's progress as ``touch`` records it: ``{"v": 0.0-1.0, "n": note, "t":
    ms}``; ``value`` is None unless ``v`` is a number (then clamped to [0, 1])."""

    value: float | None
    note: str | None
    at_ms: int | None

    @classmethod
    def of(cls, decoded: object) -> Progress | None:
        """From the decoded JSON (as :attr:`JobInfo.progress`); None unless an object."""
        if not isinstance(decoded, dict):
            return None
        v, t = decoded.get("v"), decoded.get("t")
        return cls(
            value=min(1.0, max(0.0, float(v))) if isinstance(v, float) else _unit(v),
            note=str(decoded.get("n") or "") or None,
            at_ms=t if isinstance(t, int) else None,
        )

    @classmethod
    def decode(cls, raw: bytes | str | None) -> Progress | None:
        return cls.of(decode_json(raw))

    @property
    def at(self) -> datetime | None:
        return None if self.at_ms is None else from_ms(self.at_ms)


def _unit(v: object) -> float | None:
    """An int progress value clamped to [0, 1] (any size: no float overflow); else None."""
    if not isinstance(v, int):
        return None
    return 1.0 if v >= 1 else 0.0


def decode_json(raw: bytes | str | None) -> Any:
    """A JSON value read from Redis (a body, a record, progress); None when missing or
    not JSON."""
    if raw is None or raw in (b"", ""):
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def record_task(raw: bytes | str | None) -> str | None:
    """The task of a job from its stored record (a body ``{"task": name, ...}`` in it);
    None for a record of the JSON layout (its body is apart), another body, or garbage."""
    if raw is None:
        return None
    try:
        body = split_record(raw)[1]
        decoded = None if body is None else loads(body)
    except ValueError:
        return None
    task = decoded.get("task") if isinstance(decoded, dict) else None
    return task if isinstance(task, str) else None


def lenient_text(value: bytes | str | None) -> str | None:
    """A free-text reply (an error, a consumer id) as text, bad UTF-8 replaced."""
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def score_text(score: float | None) -> str:
    """A score as an exact decimal string (integral scores without ``.0``); '' for None."""
    if score is None:
        return ""
    if math.isfinite(score) and score == int(score) and abs(score) < 2**63:
        return str(int(score))
    return repr(score)
