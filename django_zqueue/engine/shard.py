"""A shard: the keys and script calls of one hash tag, as the engine builds them.

An unpartitioned queue is one shard, ``{prefix:queue}``; a queue with ``partitions: N``
is N shards, ``{prefix:queue#i}``. Every script call touches one shard's keys only (one
Redis Cluster slot). A :class:`Shard` is the engine's typed call builder for one hash
tag: one method per script, which puts the shard's keys and the queue's
:class:`~django_zqueue.engine.scripts.Policy` into a :class:`~django_zqueue.engine.scripts.Call`
(keys, arguments, and how its reply reads: the readers of
:mod:`django_zqueue.engine.scripts`). The builders do no validation. The
:class:`~django_zqueue.engine.Engine` owns the shards, decides which one a job goes to,
and sends the calls; :class:`~django_zqueue.queue.Queue` validates input.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..exceptions import InvalidArgument
from .keys import SCRIPT_ROLES, QueueKeys
from .records import Ack, Claimed, JobInfo, Message, NackResult, NewJob, ScanResult, text
from .records.links import FlowJob, Resolution, Resolved
from .scripts import (
    MAX_POSITIONS,
    Arg,
    Call,
    Policy,
    SearchStep,
    Standing,
    ack_columns,
    entry_arg,
    job_arg,
    lean_args,
    read_acked,
    read_as,
    read_clashes,
    read_codes,
    read_deadline,
    read_entries,
    read_flag,
    read_int,
    read_nack,
    read_once,
    read_search_step,
    read_standings,
    read_state,
)
from .scripts.replies import AckManyCode, CancelReply, DeleteReply, MoveReply, RequeueReply


class Shard:
    """One hash tag of a queue: ``index`` in the queue's shards, its ``keys``, and the
    queue's ``policy`` (the same for each of its shards)."""

    __slots__ = ("index", "keys", "policy", "queue")

    def __init__(self, queue: str, index: int, keys: QueueKeys, policy: Policy) -> None:
        self.queue = queue
        self.index = index
        self.keys = keys
        self.policy = policy

    def __repr__(self) -> str:
        return f"<Shard {self.keys.tag}>"

    # ---------------------------------------------------------------- write side

    def publish(self, jobs: Sequence[NewJob]) -> Call[list[tuple[str, str]]]:
        """Returns the clashing ``(tag, state)`` pairs; empty: all written."""
        k, p = self.keys, self.policy
        lean = lean_args(jobs[0], p) if len(jobs) == 1 else None
        if lean is not None:  # the common job: only the writes its state needs
            return self.publish_lean(lean)
        args = (p.packed_for("publish"), *(job_arg(j, None, p.compact) for j in jobs))
        keys = k.pick(SCRIPT_ROLES["publish"])
        if any(j.spec.ordering_key for j in jobs):  # the index of keyed jobs (rank_key.lua)
            keys = (*keys, k.okeyed)
        return Call("publish", keys, args, read_clashes)

    def publish_lean(self, args: tuple[Arg, ...]) -> Call[list[tuple[str, str]]]:
        """``publish_lean.lua`` with its arguments (:func:`lean_args`): the clashing
        ``(tag, state)`` pair, or none."""
        keys = self.keys.pick(SCRIPT_ROLES["publish_lean"])
        return Call("publish_lean", keys, args, read_clashes)

    def publish_once(self, job: NewJob) -> Call[tuple[str, str]]:
        """The job's spec holds its ``debounce_ms`` and ``unique_ms``. Returns
        ``("new", "")``, ``("replaced", "")`` or ``("clash", state)``."""
        k, p = self.keys, self.policy
        keys = (*k.pick(SCRIPT_ROLES["publish_once"]), k.unique(job.tag))
        if job.spec.ordering_key:  # the index of keyed jobs (rank_key.lua)
            keys = (*keys, k.okeyed)
        args = (p.packed_for("publish_once"), job_arg(job, None, p.compact))
        return Call("publish_once", keys, args, read_once)

    def claim(self, batch: int, consumer: str) -> Call[Claimed]:
        """``claim.lua``; ``claim_fair.lua`` for a queue with ``fairness="groups"``."""
        queue, p = self.queue, self.policy
        script = "claim_fair" if p.mode == "fair" else "claim"
        return Call(
            script,
            self.keys.pick(SCRIPT_ROLES[script]),
            (batch, p.packed_for(script), consumer),
            lambda reply: Claimed.from_reply(queue, reply),
        )

    def ack(
        self,
        msg: Message,
        result: str,
        result_ttl_ms: int,
        run_ms: int | None,
        passed: str = "",
    ) -> Call[bool]:
        """``passed``: the result handed to dependents (JSON; '' = null)."""
        k, p = self.keys, self.policy
        tag = msg.tag
        keys = (*k.pick(SCRIPT_ROLES["ack"]), k.result(tag), k.unique(tag), k.steps(tag))
        run = "" if run_ms is None else run_ms
        args = (msg.tag, msg.token, p.packed_for("ack"), result, result_ttl_ms, run, passed)
        if p.keep_finished:  # the history's keys only when kept: none touched otherwise
            keys = (*keys, *k.history_keys())
        return Call("ack", keys, args, read_acked)

    def ack_many(self, acks: Sequence[Ack]) -> Call[list[AckManyCode]]:
        """One call finishing up to 100 deliveries of one shard (``ack_many.lua``): per
        job 1 acked, 0 stale, 2 left to ``ack.lua``."""
        k, p = self.keys, self.policy
        keys = list(k.pick(SCRIPT_ROLES["ack_many"]))
        keys += [k.result(a.msg.tag) for a in acks if a.result]
        args: list[Arg] = [p.packed_for("ack_many"), ack_columns(acks)]
        if p.keep_finished:  # the history's keys only when kept: none touched otherwise
            keys += k.history_keys()
        return Call("ack_many", tuple(keys), tuple(args), read_codes)

    def release(self, msg: Message) -> Call[bool]:
        k, p = self.keys, self.policy
        keys = (k.leased, k.ready, k.meta, k.ctr, k.progress, k.stats, k.notify)
        return Call("release", keys, (msg.tag, msg.token, p.packed_for("release")), read_flag)

    def nack(self, msg: Message, error: str, retry_ms: int, bury: bool) -> Call[NackResult]:
        p = self.policy
        args = (msg.tag, msg.token, error, retry_ms, "1" if bury else "0", p.packed_for("nack"))
        return Call("nack", self.keys.pick(SCRIPT_ROLES["nack"]), args, read_nack)

    def touch(self, msg: Message, extend_ms: int, progress: str) -> Call[int | None]:
        """Returns the new lease deadline (ms), None for a stale delivery, or
        :data:`CANCELLED` for a cancelled one."""
        k, p = self.keys, self.policy
        args = (msg.tag, msg.token, extend_ms, progress, p.packed_for("touch"))
        keys = (k.leased, k.meta, k.progress, k.cancelled(msg.tag))
        return Call("touch", keys, args, read_deadline)

    def scan(self, limit: int) -> Call[ScanResult]:
        keys = self.keys.pick(SCRIPT_ROLES["scan"])
        return Call("scan", keys, (limit, self.policy.packed_for("scan")), ScanResult.from_reply)

    def delete(self, tag: str, waiting_only: bool, only: str = "") -> Call[DeleteReply]:
        """``only``: a state the job must be in (``ELSEWHERE`` otherwise); '' any."""
        k = self.keys
        keys = (*k.pick(SCRIPT_ROLES["delete"]), k.steps(tag))
        args = (tag, "1" if waiting_only else "0", only)
        return Call("delete", keys, args, read_as(DeleteReply))

    def cancel(self, tag: str, ttl_ms: int, only: str = "") -> Call[CancelReply]:
        """``only``: a state the job must be in (``ELSEWHERE`` otherwise); '' any."""
        k, p = self.keys, self.policy
        keys = (*k.pick(SCRIPT_ROLES["cancel"]), k.cancelled(tag), k.steps(tag))
        args = (tag, ttl_ms, p.packed_for("cancel"), only)
        if p.keep_finished:  # the history's keys only when kept: none touched otherwise
            keys = (*keys, *k.history_keys())
        return Call("cancel", keys, args, read_as(CancelReply))

    def range_after(
        self, key: str, after: tuple[float, str] | None, top: float, limit: int
    ) -> Call[list[tuple[str, float]]]:
        """At most ``limit`` entries of sorted set ``key`` after the cursor ``after``
        (score, member; None: from the start), of score <= ``top``, in order."""
        cursor = ("", "") if after is None else (repr(float(after[0])), after[1])
        return Call("range_after", (key,), (*cursor, repr(float(top)), limit), read_entries)

    def search(
        self,
        set_name: str,
        needle: bytes,
        after: tuple[str, str] | None,
        steps: int,
        limit: int,
        *,
        pattern: bool = False,
        field: tuple[str, str] | None = None,
    ) -> Call[SearchStep]:
        """One step of a search of this shard's sorted set ``set_name`` (``ready``,
        ``delayed``, ``leased``, ``dead``, ``wait``; the ended ``finished``, ``cancels``,
        ``expired``) for ``needle`` in the jobs' bodies and tags (a Lua pattern with
        ``pattern``), or a body whose ``field`` (path, value) holds the value: at most
        ``steps`` entries after the cursor ``after`` (score text, member; None: from the
        start), at most ``limit`` matches."""
        k = self.keys
        key = getattr(k, set_name)
        kept = set_name in ("finished", "cancels")  # their records are the history's
        cursor = ("", "") if after is None else after
        path, value = field if field is not None else ("", "")
        kind, kept_arg = "p" if pattern else "", "1" if kept else "0"
        args = (needle, *cursor, steps, limit, kind, path, value, kept_arg)
        records = k.history if kept else k.meta
        return Call("search", (key, records, k.body), args, read_search_step)

    def run_now(self, tag: str, below: float | None) -> Call[MoveReply]:
        k, p = self.keys, self.policy
        keys = (k.ready, k.delayed, k.leased, k.dead, k.meta, k.notify)
        low = "" if below is None else repr(float(below))
        return Call("run_now", keys, (tag, low, p.packed_for("run_now")), read_as(MoveReply))

    def set_priority(self, tag: str, priority: int) -> Call[MoveReply]:
        k, p = self.keys, self.policy
        keys = (k.ready, k.delayed, k.leased, k.dead, k.meta, k.gpark)
        return Call(
            "set_priority", keys, (tag, priority, p.packed_for("set_priority")), read_as(MoveReply)
        )

    def requeue_dead(
        self, tag: str, front: bool = False, below: float | None = None
    ) -> Call[RequeueReply]:
        """``front``: to the front of the line, ahead of ``below`` too (the lowest ready
        score of the other partitions)."""
        k, p = self.keys, self.policy
        keys = (*k.pick(SCRIPT_ROLES["requeue_dead"]), k.wf(tag))
        low = "" if below is None else repr(float(below))
        args = (tag, p.packed_for("requeue_dead"), "1" if front else "0", low)
        return Call("requeue_dead", keys, args, read_as(RequeueReply))

    def purge_dead(self, limit: int) -> Call[int]:
        k = self.keys
        return Call(
            "purge_dead", (k.dead, k.body, k.meta, k.errors, k.progress), (limit,), read_int
        )

    # ---------------------------------------------------------------- read side

    def info(self, tag: str, with_body: bool = True) -> Call[JobInfo | None]:
        k = self.keys
        queue = self.queue
        keys = (*k.pick(SCRIPT_ROLES["info"]), k.result(tag))
        return Call(
            "info",
            keys,
            (tag, "1" if with_body else "0"),
            lambda reply: JobInfo.from_reply(queue, tag, reply),
        )

    def state(self, tag: str) -> Call[str | None]:
        """Returns ``ready``, ``delayed``, ``leased``, ``dead``, ``waiting``, ``expired``, or
        None (no such job)."""
        keys = self.keys.pick(SCRIPT_ROLES["state"])
        return Call("state", keys, (tag,), read_state)

    def rank_key(self, tag: str, most: int) -> Call[list[int]]:
        """``rank_key.lua``: ``[0, rank]`` (waiting, its place in its key's line), ``[1]``
        not waiting, ``[2]`` no ordering key, ``[3]`` in no index, ``[4]`` the key has
        more than ``most`` entries."""
        keys = self.keys.pick(SCRIPT_ROLES["rank_key"])
        return Call("rank_key", keys, (tag, most), lambda r: [int(x) for x in r])

    def positions(self, tags: Sequence[str]) -> Call[list[Standing]]:
        """Where each of ``tags`` stands, in one atomic read (1 to ``MAX_POSITIONS``)."""
        if not 1 <= len(tags) <= MAX_POSITIONS:
            raise InvalidArgument(f"positions takes 1 to {MAX_POSITIONS} tags, got {len(tags)}")
        tags = tuple(tags)
        keys = self.keys.pick(SCRIPT_ROLES["positions"])
        return Call("positions", keys, tags, read_standings(tags))

    def fire(
        self,
        name: str,
        expected_tick: int,
        next_tick: int | None,
        job: NewJob | None,
        digest: str | None = None,
    ) -> Call[bool]:
        """Returns True when this call fired (or moved on) the tick; False: already done
        (or, with ``digest``, the stored definition is no longer the one of that digest)."""
        k, p = self.keys, self.policy
        nxt = "" if next_tick is None else next_tick
        fire = "0" if job is None else "1"
        head = (name, expected_tick, nxt, fire, p.packed_for("fire"))
        args = (*head, "" if job is None else job_arg(job, None, p.compact), digest or "")
        return Call("fire", k.pick(SCRIPT_ROLES["fire"]), args, read_flag)

    # ---------------------------------------------------------------- workflows

    def wf_publish(self, jobs: Sequence[FlowJob]) -> Call[list[tuple[str, str]]]:
        """As :meth:`publish`, with each job's links (at most 100 jobs)."""
        k, p = self.keys, self.policy
        specs = tuple(job_arg(fj.job, fj.link_fields(), p.compact) for fj in jobs)
        keys = (*k.pick(SCRIPT_ROLES["wf_publish"]), *(k.wf(fj.job.tag) for fj in jobs))
        return Call("wf_publish", keys, (p.packed_for("wf_publish"), *specs), read_clashes)

    def group_check(self, adds: Sequence[tuple[str, int]]) -> Call[int]:
        """Read-only: raises :class:`QueueFull` naming the first group of ``adds`` (group
        key, jobs that would enter a line) whose jobs do not fit in ``group_max_length``."""
        k, p = self.keys, self.policy
        args: tuple[Arg, ...] = (p.packed_for("group_check"),)
        args += tuple(entry_arg(group=group, jobs=n) for group, n in adds)
        return Call("group_check", (k.ready, k.delayed, k.meta, k.gjobs), args, read_int)

    def wf_link(self, parent: str, kid: str, most: int) -> Call[str]:
        """Returns ``linked``, ``dead``, ``corrupt`` or '' (no such parent)."""
        k = self.keys
        keys = (*k.pick(SCRIPT_ROLES["wf_link"]), k.wf(parent))
        return Call("wf_link", keys, (parent, kid, most), text)

    def wf_resolve(self, entries: Sequence[Resolution]) -> Call[Resolved]:
        k, p = self.keys, self.policy
        keys = (*k.pick(SCRIPT_ROLES["wf_resolve"]), *(k.wf(e.child) for e in entries))
        args: list[Arg] = [p.packed_for("wf_resolve")]
        args += (entry_arg(**e._asdict()) for e in entries)
        return Call("wf_resolve", keys, tuple(args), Resolved.from_reply)

    def wf_clear(self, tag: str, seen: bytes) -> Call[bool]:
        k, p = self.keys, self.policy
        keys = (*k.pick(SCRIPT_ROLES["wf_clear"]), k.wf(tag))
        return Call("wf_clear", keys, (tag, seen, p.packed_for("wf_clear")), read_flag)
