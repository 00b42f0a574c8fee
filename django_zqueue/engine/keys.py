"""Every Redis key name of a queue is built here and nowhere else.

All keys of one queue share the hash tag ``{<prefix>:<queue>}`` so that every script
touches a single Redis Cluster slot. Scripts receive these names in ``KEYS``.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

#: the length of one slot of per-task statistics (``{p:q}:tstats:<slot>``)
TASK_STATS_SLOT_SECONDS = 300


#: (tag, roles) -> the keys of those roles (:meth:`QueueKeys.pick`): a key is
#: ``<tag>:<role>``, so the tag and the roles name them
_PICKED: dict[tuple[str, tuple[str, ...]], tuple[str, ...]] = {}


@dataclass(frozen=True, slots=True)
class QueueKeys:
    tag: str
    ready: str  # ZSET id -> dequeue order (rank 0 is claimed next)
    delayed: str  # ZSET id -> run-at, ms on Redis TIME
    leased: str  # ZSET id -> lease deadline, ms on Redis TIME
    dead: str  # ZSET id -> time of death, ms
    body: str  # HASH id -> encoded body
    meta: str  # HASH id -> JSON job record (priority, attempts, token, ...)
    errors: str  # HASH id -> last error text
    progress: str  # HASH id -> JSON progress reported by the running job
    ctr: str  # HASH seq / clock / tok: server-side counters
    rate: str  # HASH tokens / ts: the qps token bucket
    stats: str  # HASH counters: enqueued (+ en: lean publishes not yet scanned), acked, ...
    notify: str  # LIST wake-up tokens for blocked consumers
    workers: str  # HASH worker id -> JSON {threads, seen, host, pid, state}: live consumers
    wctl: str  # HASH worker id -> the order left for it: "quiet" or "stop" (engine/workers.py)
    sched: str  # ZSET periodic schedule name -> next tick, ms (paused ones are absent)
    sched_defs: str  # HASH schedule name -> JSON definition (and "paused")
    sched_last: str  # HASH schedule name -> "tick_ms job_tag" of its last firing
    paused: str  # STRING present while the queue is paused (claim.lua hands out nothing)
    gstarts: str  # HASH group -> starts this minute (fair queues; minute in ctr "gmin")
    gstarts_prev: str  # HASH group -> starts in the minute before
    ginflight: str  # ZSET (lex) "group\0token\0id": jobs in flight per group (limits)
    grate: str  # HASH group -> theoretical arrival time, ms (group_qps)
    gpark: str  # ZSET (lex) "group\0order\0score\0run-at\0id": jobs set aside by group
    gwait: str  # ZSET group -> ms of the next look at its set-aside jobs
    gjobs: str  # ZSET (lex) "group\0id": jobs published under group_max_length (index)
    wait: str  # ZSET id -> ms it began waiting for its parents (workflows: "waiting")
    wf_out: str  # ZSET id -> ms its end was recorded: the workflow outbox
    wf_res: str  # HASH id -> "1<result JSON>" (succeeded) or "0" (failed): outbox entries
    expiry: str  # ZSET id -> ms it expires unless started (jobs with an expiry: index)
    expired: str  # ZSET id -> ms it expired (terminal state "expired"; its record kept)
    proto: str  # HASH the queue's policy for producers in other languages (docs/protocol.md)
    finished: str  # ZSET id -> ms it succeeded: the history of finished jobs (keep_finished)
    cancels: str  # ZSET id -> ms it was cancelled: the history's cancelled jobs
    history: str  # HASH id -> kept record of a job in finished or cancels (compact)
    logs: str  # HASH id -> the job's log (engine/joblogs.py): dropped with its history entry
    ohold: str  # HASH ordering key -> tag of the job that holds it (lua/_order.lua)
    oaside: str  # ZSET (lex) "key\0order\0score\0id": jobs set aside behind their key
    okeyed: str  # ZSET (lex) "key\0id": jobs with an ordering key not yet claimed (index)

    def result(self, id: str) -> str:
        """STRING: the stored result of finished job ``id`` (kept with a TTL)."""
        return f"{self.tag}:result:{id}"

    def unique(self, id: str) -> str:
        """STRING: tag ``id`` is reserved while it exists (``unique_for``, with a TTL)."""
        return f"{self.tag}:unique:{id}"

    def cancelled(self, id: str) -> str:
        """STRING: the record of cancelled job ``id`` (kept with a TTL)."""
        return f"{self.tag}:cancelled:{id}"

    def steps(self, id: str) -> str:
        """HASH: durable records of job ``id`` (docs/durable.md): ``s:<name>`` a step's
        JSON result, ``z:<name>`` a sleep's wake time (ms), ``w:<name>`` a wait's
        deadline (ms), ``g:<name>`` a signal's JSON payload. Deleted when the job is
        acked, cancelled or deleted; else it expires (TTL renewed at each run)."""
        return f"{self.tag}:steps:{id}"

    def log(self, id: str) -> str:
        """STREAM: the log of job ``id`` in the older layout, still read (its TTL drops
        it): one entry per line, ``a`` attempt, ``l`` level, ``m`` text. Logs are now
        written to the queue's ``logs`` HASH (:mod:`django_zqueue.engine.joblogs`)."""
        return f"{self.tag}:log:{id}"

    def out(self, id: str) -> str:
        """STREAM: the streamed output of job ``id`` (docs/position.md, "Streamed
        output"): one entry per chunk, field ``c``; capped, with a TTL renewed at each
        chunk (:mod:`django_zqueue.engine.jobstreams`)."""
        return f"{self.tag}:out:{id}"

    def chunk_call(self, token: str) -> str:
        """STRING: the JSON list of the jobs of one chunk handler call (with a TTL:
        :mod:`django_zqueue.engine.chunkcalls`), ``token`` its first job's delivery token."""
        return f"{self.tag}:chunk:{token}"

    def chunk_of(self, id: str) -> str:
        """STRING: JSON ``[first tag, token]``: the chunk call that ran job ``id`` last
        (with a TTL: :mod:`django_zqueue.engine.chunkcalls`)."""
        return f"{self.tag}:chunkof:{id}"

    def task_stats(self, slot: int) -> str:
        """HASH: per-task counts and run-time histogram of one 5-minute slot (expires after
        an hour: :mod:`django_zqueue.worker.taskstats`)."""
        return f"{self.tag}:tstats:{slot}"

    def recent_task_stats(self, now_s: float) -> list[str]:
        """The task statistics keys that may still exist at ``now_s`` (Unix time): the
        last hour's slots, and one each side for clocks a little off."""
        now = int(now_s) // TASK_STATS_SLOT_SECONDS
        return [self.task_stats(s) for s in range(now - 14, now + 2)]

    def roll(self, minutes: int) -> str:
        """HASH: the ring of ``minutes``-minute buckets (10 or 60) the scanner rolls the
        minute ring up into (:mod:`django_zqueue.engine.rollup`); optional, with a TTL."""
        return f"{self.tag}:roll{minutes}"

    def wf(self, id: str) -> str:
        """HASH: workflow links of job ``id``: ``kids`` (its dependents), ``par`` (its
        parents), ``need``, ``got`` and ``r<i>`` (results passed by parent i)."""
        return f"{self.tag}:wf:{id}"

    def lifecycle(self) -> list[str]:
        """The KEYS of the scripts that can move a job anywhere (nack, scan), in order."""
        return list(self.pick(LIFECYCLE))

    def all(self) -> list[str]:
        """Every fixed key of the queue (result keys are per job and expire by themselves)."""
        return [
            *self.lifecycle(),
            self.rate,
            self.workers,
            self.wctl,
            self.sched,
            self.sched_defs,
            self.sched_last,
            self.paused,
            self.gstarts,
            self.gstarts_prev,
            self.ginflight,
            self.grate,
            self.gpark,
            self.gwait,
            self.gjobs,
            self.expiry,
            self.expired,
            self.proto,
            *self.history_keys(),
            self.ohold,
            self.oaside,
            self.okeyed,
            self.roll(10),
            self.roll(60),
        ]

    def pick(self, roles: Iterable[str]) -> tuple[str, ...]:
        """The keys of ``roles`` (each a field of :data:`KEY_TYPES`, the one table of
        roles; the key of role ``r`` is ``<tag>:<r>``), in that order: the KEYS a script
        names by role (:data:`SCRIPT_ROLES`), made once per list of roles. An unknown role
        raises KeyError."""
        roles = tuple(roles)
        picked = _PICKED.get((self.tag, roles))
        if picked is None:
            unknown = [role for role in roles if role not in KEY_TYPES]
            if unknown:
                raise KeyError(f"no key role {unknown[0]!r}")
            picked = tuple(getattr(self, role) for role in roles)
            if len(_PICKED) >= 10_000:  # (bounded: queues' tags x scripts, a few hundred)
                _PICKED.clear()
            _PICKED[(self.tag, roles)] = picked
        return picked

    def history_keys(self) -> list[str]:
        """The keys of the history of finished jobs, in the order the scripts take them:
        ``finished``, ``cancels``, ``history``, then ``logs`` (the jobs' logs, dropped
        with their history entries)."""
        return [self.finished, self.cancels, self.history, self.logs]


#: the Redis type (a ``TYPE`` reply) of each fixed key of a queue, by its field in
#: :class:`QueueKeys` (docs/architecture.md, "Keys of a queue")
KEY_TYPES: dict[str, str] = {
    "ready": "zset",
    "delayed": "zset",
    "leased": "zset",
    "dead": "zset",
    "body": "hash",
    "meta": "hash",
    "errors": "hash",
    "progress": "hash",
    "ctr": "hash",
    "rate": "hash",
    "stats": "hash",
    "notify": "list",
    "workers": "hash",
    "wctl": "hash",
    "sched": "zset",
    "sched_defs": "hash",
    "sched_last": "hash",
    "paused": "string",
    "gstarts": "hash",
    "gstarts_prev": "hash",
    "ginflight": "zset",
    "grate": "hash",
    "gpark": "zset",
    "gwait": "zset",
    "gjobs": "zset",
    "wait": "zset",
    "wf_out": "zset",
    "wf_res": "hash",
    "expiry": "zset",
    "expired": "zset",
    "proto": "hash",
    "finished": "zset",
    "cancels": "zset",
    "history": "hash",
    "logs": "hash",
    "ohold": "hash",
    "oaside": "zset",
    "okeyed": "zset",
}


#: the keys of the scripts that can move a job anywhere (nack, scan), in order
LIFECYCLE: tuple[str, ...] = ("ready", "delayed", "leased", "dead", "body", "meta", "errors")
LIFECYCLE += ("progress", "ctr", "stats", "notify", "wait", "wf_out", "wf_res")
_CLAIM = ("ready", "delayed", "leased", "body", "meta", "ctr", "rate", "stats", "dead", "errors")
_WF = ("wf_out", "wf_res")
_SETS = ("ready", "delayed", "leased", "dead")
_HISTORY = ("finished", "cancels", "history")
_ACK = ("leased", "body", "meta", "errors", "progress", "stats", "notify")
_DELETE = ("ready", "delayed", "dead", "leased", "body", "meta", "errors", "progress")
_GROUPS = ("gstarts", "gstarts_prev", "ginflight", "grate", "gpark", "gwait")
_PUBLISH: tuple[str, ...] = ("ready", "delayed", "body", "meta", "ctr", "notify", "stats")
_PUBLISH += ("dead", "leased", "wait", "expiry", "expired", "gjobs")
#: the keys a publish reads only to name the state of a tag in use (``_tag_state.lua``)
_TAG_STATE = ("delayed", "leased", "dead", "wait", "expired")
_RANK_KEY = ("ready", "wait", "meta", "ohold", "oaside", "okeyed")

#: the roles of the KEYS of each script that names its keys by role, in KEYS order (its
#: per-job keys, if any, follow them). The script's Lua lists the same roles
#: (``key_roles(KEYS, {...})``, ``lua/_keys.lua``), which checks each key is its role's;
#: ``tests/test_key_roles.py`` checks both lists agree. A new state is a new role here,
#: in the scripts that take it, and in :class:`QueueKeys`.
SCRIPT_ROLES: dict[str, tuple[str, ...]] = {
    "ack": (*_ACK, *_WF),
    "ack_many": _ACK,
    "publish": _PUBLISH,
    "publish_lean": ("ready", "meta", "ctr", "notify", "stats", *_TAG_STATE),
    "publish_once": _PUBLISH,
    "wf_publish": _PUBLISH,
    "fire": (*_PUBLISH[:9], "sched", "sched_last", "expiry", "expired", "sched_defs"),
    "claim": (*_CLAIM, "paused", "expiry", "expired", *_WF, "ohold", "oaside", "wait", "okeyed"),
    "claim_fair": (*_CLAIM, *_GROUPS, "paused", "expiry", "expired", *_WF, "gjobs"),
    "nack": LIFECYCLE,
    "scan": (*LIFECYCLE, "expiry", "expired", *_HISTORY, "logs"),
    "cancel": (*_SETS, "body", "meta", "errors", "progress", "stats", "notify", "wait", *_WF),
    "delete": (*_DELETE, "stats", "wait", *_WF, "expired", "expiry", "logs"),
    "requeue_dead": ("dead", "ready", "meta", "ctr", "stats", "notify", "errors", *_WF),
    "info": (*_SETS, "meta", "errors", "progress", "body", "wait", "expired", *_HISTORY),
    "state": ("ready", "delayed", "leased", "dead", "wait", "expired"),
    "rank_key": (*_RANK_KEY, "leased", "delayed", "dead"),
    "positions": ("ready", "delayed", "leased", "dead", "wait", "expired"),
    "wf_link": (*_SETS, "wait", "meta"),
    "wf_resolve": ("ready", "wait", "dead", "meta", "errors", "ctr", "stats", "notify", *_WF),
    "wf_clear": ("wf_out", "wf_res", "meta", "dead"),
}


def typed_keys(k: QueueKeys) -> list[tuple[str, str, str]]:
    """``(field, key, expected type)`` of every fixed key of ``k`` (see KEY_TYPES)."""
    return [(field, getattr(k, field), kind) for field, kind in KEY_TYPES.items()]


def wrong_types(client: Any, keys: list[QueueKeys]) -> list[str]:
    """The fixed keys among ``keys`` whose type is wrong, as ``key (found, not
    expected)``, read with ``client`` (one round trip; [] when it cannot be read)."""
    fixed = [(key, kind) for k in keys for _, key, kind in typed_keys(k)]
    try:
        pipe = client.pipeline(transaction=False)
        for key, _ in fixed:
            pipe.type(key)
        found = [t.decode() if isinstance(t, bytes) else str(t) for t in pipe.execute()]
    except Exception:
        return []
    return [
        f"{key} ({t}, not {kind})"
        for (key, kind), t in zip(fixed, found, strict=True)
        if t not in (kind, "none")
    ]


#: what to run when a script fails on a key (logged with the error)
KEYS_FIX = "python manage.py zqueue_doctor names the key; --repair --yes repairs what is safe"


def queue_keys(prefix: str, queue: str) -> QueueKeys:
    tag = "{%s:%s}" % (prefix, queue)  # noqa: UP031 - braces are literal here
    return QueueKeys(
        tag=tag,
        ready=f"{tag}:ready",
        delayed=f"{tag}:delayed",
        leased=f"{tag}:leased",
        dead=f"{tag}:dead",
        body=f"{tag}:body",
        meta=f"{tag}:meta",
        errors=f"{tag}:errors",
        progress=f"{tag}:progress",
        ctr=f"{tag}:ctr",
        rate=f"{tag}:rate",
        stats=f"{tag}:stats",
        notify=f"{tag}:notify",
        workers=f"{tag}:workers",
        wctl=f"{tag}:wctl",
        sched=f"{tag}:sched",
        sched_defs=f"{tag}:sched_defs",
        sched_last=f"{tag}:sched_last",
        paused=f"{tag}:paused",
        gstarts=f"{tag}:gstarts",
        gstarts_prev=f"{tag}:gstarts_prev",
        ginflight=f"{tag}:ginflight",
        grate=f"{tag}:grate",
        gpark=f"{tag}:gpark",
        gwait=f"{tag}:gwait",
        gjobs=f"{tag}:gjobs",
        wait=f"{tag}:wait",
        wf_out=f"{tag}:wf_out",
        wf_res=f"{tag}:wf_res",
        expiry=f"{tag}:expiry",
        expired=f"{tag}:expired",
        proto=f"{tag}:proto",
        finished=f"{tag}:finished",
        cancels=f"{tag}:cancels",
        history=f"{tag}:history",
        logs=f"{tag}:logs",
        ohold=f"{tag}:ohold",
        oaside=f"{tag}:oaside",
        okeyed=f"{tag}:okeyed",
    )


def partition_keys(prefix: str, queue: str, partitions: int) -> list[QueueKeys]:
    """The keys of each partition of a queue: ``{<prefix>:<queue>#<i>}``, i in [0, N).

    One partition (the default) is the queue's own keys, ``{<prefix>:<queue>}``, unchanged.
    Queue names cannot contain ``#``, so a partition's tag never collides with a queue's."""
    if partitions == 1:
        return [queue_keys(prefix, queue)]
    return [queue_keys(prefix, f"{queue}#{i}") for i in range(partitions)]


def layout_key(prefix: str, queue: str) -> str:
    """STRING: the number of partitions the queue's jobs were published with (written
    only by partitioned queues, so a change of ``partitions`` is detected)."""
    return "{%s:%s}:partitions" % (prefix, queue)  # noqa: UP031 - braces are literal here


def partition_of(tag: str, partitions: int) -> int:
    """The partition of job ``tag``: CRC-32 of its UTF-8 bytes modulo ``partitions``.

    Stable across processes and Python versions (never ``hash()``). Tags starting with
    ``cron:`` (periodic jobs) live in partition 0, with the queue's schedules, so
    ``fire.lua`` touches one hash tag."""
    if partitions == 1 or tag.startswith("cron:"):
        return 0
    return zlib.crc32(tag.encode("utf-8")) % partitions
