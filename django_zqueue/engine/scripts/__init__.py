"""The Lua scripts, loaded once, and how each one's reply reads.

Each ``lua/<name>.lua`` file holds one atomic operation and starts with its contract
(KEYS, ARGV, return value); :mod:`django_zqueue.engine.scripts.source` puts them together with the
helpers they ``--@include``.

Where the server has Redis Functions (7.0+, Valkey 7.2+), every script is one function
of a library loaded once (``FUNCTION LOAD``): a call is ``FCALL`` (``FCALL_RO`` for a
script that writes nothing), and the helpers are not compiled again at each call. The
library is persisted and replicated with the data; on a server that lost it (restarted
without persistence, a ``FUNCTION FLUSH``) the ``Function not found`` reply makes the
call load it and send the call once more (Redis ran nothing, so nothing runs twice).

On a Redis Cluster, and with ``ZQUEUE["LUA_FUNCTIONS"] = False``, a call is a plain
``EVALSHA`` instead (no ``SCRIPT EXISTS`` round trip; after a ``SCRIPT FLUSH`` the
NOSCRIPT reply loads the script and sends the call once more). redis-py routes an
EVALSHA by its first key (all keys of a queue share one slot), where it asks a node for
an FCALL's keys first: one more round trip per call. ``SCRIPT LOAD`` goes to every
master. A cluster pipeline refuses ``evalsha()`` (and redis-py's ``Script`` with it), so
script calls in any pipeline are queued as plain commands, and :meth:`Batch.send` loads
the scripts and resends what was missing: a replica promoted by a failover has no
scripts loaded.

A call is a typed :class:`Call` (keys, arguments, and how its reply reads: the
``read_*`` functions here), built by a shard of the engine
(:class:`~django_zqueue.engine.shard.Shard`, one method per script);
:mod:`django_zqueue.engine.scripts.calls` holds ``Call``, ``Pending`` and ``Batch`` and maps error
replies to exceptions in one table, :data:`ERRORS`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from enum import IntEnum
from typing import Any, Literal, NamedTuple, TypeAlias, TypeVar

from redis.exceptions import ResponseError

from ...exceptions import ScriptArgumentError as ScriptArgumentError
from ...exceptions import ScriptError as ScriptError
from ...exceptions import SequenceExhausted as SequenceExhausted
from ...version import __version__
from ..records import Ack, NackResult, NewJob, text
from ..records.spec import (
    JobSpec,
    body_parts,
    pack_columns,
    pack_ints,
    pack_job,
    pack_map,
    pack_texts,
)
from ..redis.connection import is_out_of_memory
from ..redis.direct import direct_for
from .calls import ERRORS as ERRORS
from .calls import Arg as Arg
from .calls import Batch as Batch
from .calls import Call as Call
from .calls import Calls as Calls
from .calls import Pending as Pending
from .calls import Sink as Sink
from .calls import aload_library as aload_library
from .calls import is_cluster as is_cluster
from .calls import is_cluster_pipeline as is_cluster_pipeline
from .calls import is_missing as is_missing
from .calls import load_library as load_library
from .calls import script_error as script_error
from .replies import (
    AckManyCode,
    AckReply,
    NackReply,
    TouchReply,
)
from .source import (
    BUILD_RE,
    PROTOCOL_LIBRARY,
    READ_ONLY,
    library,
    protocol_library,
    sha1,
    version_tuple,
)
from .source import includes as includes
from .source import lua_file as lua_file
from .source import policy_fields as policy_fields
from .source import source as source

Client: TypeAlias = Any  # redis.Redis or RedisCluster
T = TypeVar("T")
E = TypeVar("E", bound=IntEnum)

SCRIPT_NAMES = (
    "publish",
    "publish_lean",
    "claim",
    "claim_fair",
    "ack",
    "ack_many",
    "release",
    "nack",
    "touch",
    "scan",
    "delete",
    "requeue_dead",
    "purge_dead",
    "info",
    "state",
    "positions",
    "fire",
    "sched_put",
    "cancel",
    "run_now",
    "set_priority",
    "publish_once",
    "wf_publish",
    "wf_link",
    "wf_resolve",
    "wf_clear",
    "range_after",
    "steps",
    "step",
    "park",
    "signal",
    "parked",
    "search",
    "group_check",
    "log_append",
    "rank_key",
)

#: what ``touch.lua`` returns for a delivery that was cancelled (``cancel.lua``)
CANCELLED = TouchReply.CANCELLED


def read_int(reply: Any) -> int:
    return int(reply)


def read_flag(reply: Any) -> bool:
    return int(reply) == 1


#: ``ack_many``'s code of each job, by value (a lookup per job, not an Enum call)
_ACK_MANY_CODES = {c.value: c for c in AckManyCode}


def read_codes(reply: Any) -> list[AckManyCode]:
    try:
        return [_ACK_MANY_CODES[int(x)] for x in reply]
    except KeyError as exc:
        raise ValueError(f"{exc.args[0]!r} is not a valid AckManyCode") from None


def read_nack(reply: Any) -> NackResult:
    code = NackReply(int(reply))
    if code is NackReply.RETRIED:
        return "retry"
    return "dead" if code in (NackReply.DEAD, NackReply.DEAD_FLOW) else None


def read_acked(reply: Any) -> bool:
    return AckReply(int(reply)) is not AckReply.STALE


def read_as(kind: type[E]) -> Callable[[Any], E]:
    def read(reply: Any) -> E:
        return kind(int(reply))

    return read


def flow_ended(call: Call[Any], reply: Any) -> bool:
    """Whether an ack or nack reply says the job's end went to the workflow outbox: its
    dependents are to be told (``Queue.dispatch``)."""
    if isinstance(reply, BaseException):
        return False
    return (call.script == "ack" and int(reply) == AckReply.ACKED_FLOW) or (
        call.script == "nack" and int(reply) == NackReply.DEAD_FLOW
    )


def read_deadline(reply: Any) -> int | None:
    ms = int(reply)
    return ms or None


def read_once(reply: Any) -> tuple[str, str]:
    return text(reply[0]), text(reply[1]) if len(reply) > 1 else ""


def read_entries(reply: Any) -> list[tuple[str, float]]:
    return [(text(m), float(sc)) for m, sc in zip(reply[0::2], reply[1::2], strict=True)]


class SearchStep(NamedTuple):
    """One step of ``search.lua``: ``looked`` entries looked at from ``rank0``, the
    ``matches`` (tag, score as Redis sent it, rank at this step), ``more`` when the set
    may hold more after ``last`` (score text, member: the next step's cursor; None when
    nothing was looked at)."""

    looked: int
    more: bool
    rank0: int
    last: tuple[str, str] | None
    matches: list[tuple[str, str, int]]


def read_search_step(reply: Any) -> SearchStep:
    looked, more, rank0 = int(reply[0]), int(reply[1]) == 1, int(reply[2])
    last = (text(reply[3]), text(reply[4])) if looked else None
    rest = reply[5:]
    matches = [
        (text(t), text(sc), rank0 + int(off))
        for t, sc, off in zip(rest[0::3], rest[1::3], rest[2::3], strict=True)
    ]
    return SearchStep(looked, more, rank0, last, matches)


def read_state(reply: Any) -> str | None:
    return text(reply) or None


#: at most this many jobs per ``positions`` call
MAX_POSITIONS = 500
#: ``positions.lua`` codes of a job that is not ready
_NOT_READY = {-1: "delayed", -2: "leased", -3: "dead", -4: "", -5: "waiting", -6: "expired"}


class Standing(NamedTuple):
    """Where one job stands (``positions.lua``): ``state`` is ready, delayed, leased, dead,
    waiting (for its parents) or '' (in no set); a ready job has its ``rank`` in its
    shard and its ``score``."""

    tag: str
    state: str
    rank: int | None = None
    score: float | None = None


def read_standings(tags: Sequence[str]) -> Callable[[Any], list[Standing]]:
    def read(reply: Any) -> list[Standing]:
        out = []
        for tag, code, score in zip(tags, reply[0::2], reply[1::2], strict=True):
            n = int(code)
            if n >= 0:
                out.append(Standing(tag, "ready", n, float(score)))
            else:
                out.append(Standing(tag, _NOT_READY[n]))
        return out

    return read


def read_clashes(reply: Any) -> list[tuple[str, str]]:
    if int(reply[0]) == 0:
        return []
    return list(zip([text(x) for x in reply[1::2]], [text(x) for x in reply[2::2]], strict=True))


#: the field that asks for a record of the JSON layout (``read_job`` in ``_new_job.lua``)
_JSON_LAYOUT = {"layout": "json"}


def job_arg(job: NewJob, extra: dict[str, Any] | None = None, compact: bool = True) -> bytes:
    """A job's one script argument (``publish.lua``, ``publish_once``, ``fire``,
    ``wf_publish``): its tag, body and spec as one MessagePack map (:mod:`.jobspec`);
    with ``compact`` False, its record is written in the JSON layout."""
    if not compact:
        extra = {**(extra or {}), **_JSON_LAYOUT}
    return pack_job(job.tag, job.body, job.spec, extra, split=compact)


def takes_lean(spec: JobSpec, policy: Policy) -> bool:
    """Whether ``publish_lean.lua`` takes a job of ``spec`` in a queue of ``policy`` (its
    body aside, :func:`lean_body`): a strict queue of the compact layout without a length
    limit, a job that sets no option but its retries and priority."""
    return (
        spec.count == 1 + (spec.priority != 0)  # max_retries is always given
        and policy.mode == "strict"
        and policy.compact
        and not policy.max_length
        and not policy.group_max_length
    )


def lean_body(body: bytes) -> tuple[bytes, bytes, bytes] | None:
    """The task, args and kwargs texts ``publish_lean.lua`` takes for a job's ``body``
    (kwargs ``b""`` for ``{}``), or None for a body not of a task's shape
    (:func:`body_parts`)."""
    cut = body_parts(body)
    if cut is None or not cut[0]:
        return None
    return cut[0], cut[1], b"" if cut[2] == b"{}" else cut[2]


def lean_args(job: NewJob, policy: Policy) -> tuple[Arg, ...] | None:
    """The arguments of ``publish_lean.lua`` for ``job`` (the queue's policy first), or
    None when that script does not take it (:func:`takes_lean`, :func:`lean_body`)."""
    spec = job.spec
    if not takes_lean(spec, policy):
        return None
    texts = lean_body(job.body)
    if texts is None:
        return None
    head = policy.packed_for("publish_lean")
    return (head, job.tag, spec.max_retries, spec.priority, *texts)


def entry_arg(**values: Any) -> bytes:
    """One entry of a script's list of entries, as its one argument: a MessagePack map of
    ``values`` (None left out) that the script reads by name (``lua/_entry.lua``), the
    way a job travels (:func:`job_arg`): no script reads its arguments by stride."""
    return pack_map({name: v for name, v in values.items() if v is not None})


def ack_columns(acks: Sequence[Ack]) -> bytes:
    """The jobs of an ``ack_many.lua`` call as its one argument: a MessagePack map of
    columns read by name, one value per job in each (decoded once per call): ``id``,
    ``token``; ``result`` ('' = none) and ``ttl_ms`` (0 without a result) only when some
    job keeps a result; ``run_ms`` (-1 = not measured) only when some job's was. Each
    column packed as what it holds (a worker sends one per flush)."""
    columns = {
        "id": pack_texts([a.msg.tag for a in acks]),
        "token": pack_ints([a.msg.token for a in acks]),
    }
    if any(a.result for a in acks):
        columns["result"] = pack_texts([a.result or "" for a in acks])
        columns["ttl_ms"] = pack_ints([a.result_ttl_ms if a.result else 0 for a in acks])
    if any(a.run_ms is not None for a in acks):
        columns["run_ms"] = pack_ints([-1 if a.run_ms is None else a.run_ms for a in acks])
    return pack_columns(columns)


#: how ready scores are made (``publish.lua``): the queue's ``priority_mode``, except that a
#: partitioned queue in strict mode uses ``tstrict`` (a clock-based sequence, so scores
#: compare across its partitions)
#: ``fair``: a queue with ``fairness="groups"`` (virtual time of the job's group)
ScoreMode = Literal["strict", "tstrict", "aging", "fair"]


@dataclass(frozen=True, slots=True)
class Policy:
    """A queue's options as its scripts take them (same for each of its shards)."""

    mode: ScoreMode
    aging_us: int
    visibility_ms: int
    concurrency: int
    qps: float
    dead_max: int
    dead_ttl_ms: int
    trim_limit: int
    notify_cap: int
    ack_notify: int  # notify_cap on ack only with a concurrency limit (a slot frees)
    promote_limit: int
    group_concurrency: int = 0  # fair queues: jobs of one group in flight (0: no limit)
    group_qps: float = 0  # fair queues: starts of one group per second (0: no limit)
    max_length: int = 0  # most jobs ready + delayed per shard at a publish (0: no limit)
    group_max_length: int = 0  # fair queues: most jobs of one group ready + delayed (0: none)
    compact: bool = True  # new jobs as compact records (False: the JSON layout, lua/_record.lua)
    keep_finished: int = 0  # the history of finished jobs: most kept (0: none, lua/_history.lua)
    finished_ttl_ms: int = 86_400_000  # how long a finished job stays in the history
    #: the whole policy as one MessagePack map of the fields above, by name
    #: (``lua/_policy.lua``), made once (what a test or a tool sends to any script)
    packed: bytes = field(init=False, default=b"", compare=False, repr=False)
    #: script name -> the map of only the fields it reads (:meth:`packed_for`)
    _for_script: dict[str, bytes] = field(
        init=False, default_factory=dict, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "packed", pack_map(self._values(POLICY_FIELDS)))

    def _values(self, names: Sequence[str]) -> dict[str, Any]:
        return {name: getattr(self, name) for name in names}

    def packed_for(self, script: str) -> bytes:
        """The policy as script ``script`` takes it: a map of only the fields its source
        reads (:func:`~django_zqueue.engine.scripts.source.policy_fields`), made once per
        queue and script, so a call unpacks and checks what it uses and no more."""
        packed = self._for_script.get(script)
        if packed is None:
            packed = pack_map(self._values(policy_fields(script, POLICY_FIELDS)))
            self._for_script[script] = packed
        return packed


#: the names of a :class:`Policy`'s fields, in order (what ``lua/_policy.lua`` reads)
POLICY_FIELDS: tuple[str, ...] = tuple(
    f.name for f in fields(Policy) if f.name not in ("packed", "_for_script")
)


class Scripts:
    """The scripts registered on one redis-py client: a :class:`Call` (built by a shard
    of the engine) run alone (:meth:`run`) or many in one round trip (:class:`Batch`).
    ``functions``: call them as one Functions library (``FCALL``) where the client
    allows it (not a Redis Cluster client); else ``EVALSHA``."""

    def __init__(self, client: Client, functions: bool = True) -> None:
        self.client = client
        #: script name -> SHA1 of its source (what EVALSHA names)
        self.shas: dict[str, str] = {name: sha1(source(name)) for name in SCRIPT_NAMES}
        #: the Functions library the calls go to (None: EVALSHA)
        self.library = library(SCRIPT_NAMES) if functions and not is_cluster(client) else None
        #: script name -> (command, what it names): ("FCALL", function) or ("EVALSHA", sha)
        self.heads: dict[str, tuple[str, str]] = {name: self._head(name) for name in SCRIPT_NAMES}
        #: sends one call without redis-py's command path (None: a client that needs it)
        self.direct = direct_for(client)

    def _head(self, name: str) -> tuple[str, str]:
        if self.library is None:
            return ("EVALSHA", self.shas[name])
        return ("FCALL_RO" if name in READ_ONLY else "FCALL", self.library.functions[name])

    def sha(self, name: str) -> str:
        return self.shas[name]

    def command(self, call: Call[Any]) -> tuple[Arg, ...]:
        """The command that runs ``call``."""
        verb, target = self.heads[call.script]
        return (verb, target, len(call.keys), *call.keys, *call.args)

    def run(self, call: Call[T]) -> T:
        """Send one call; where the server has lost the scripts (Redis ran nothing),
        load them and send it once more."""
        cmd = self.command(call)
        send = self.client.execute_command if self.direct is None else self.direct.execute
        try:
            try:
                reply = send(*cmd)
            except ResponseError as exc:
                if not is_missing(exc):
                    raise
                self.load_all()
                reply = send(*self.command(call))
        except ResponseError as exc:
            error = script_error(call.script, exc)
            if error is exc:
                raise
            raise error from exc
        return call.result(reply)

    def batch(self) -> Batch:
        return Batch(self)

    def load_all(self) -> None:
        """Load the library (unless the server has it already), or every script. Redis at
        maxmemory refuses ``FUNCTION LOAD`` but not ``SCRIPT LOAD``: then the calls go as
        ``EVALSHA`` from now on (a release deployed while Redis is full still drains it)."""
        if self.library is not None:
            try:
                load_library(self.client, self.library.code)
                return
            except ResponseError as exc:
                if not is_out_of_memory(exc):
                    raise
            self.use_evalsha()
        for name in SCRIPT_NAMES:
            self.client.script_load(source(name))

    def use_evalsha(self) -> None:
        """Send every call as ``EVALSHA`` from now on (Redis refused ``FUNCTION LOAD``)."""
        self.library = None
        self.heads = {name: self._head(name) for name in SCRIPT_NAMES}


# ------------------------------------------------------------------ the wire protocol


def package_version() -> str:
    """This package's version (``django_zqueue.__version__``): the build the protocol
    library it loads carries."""
    return __version__


class LoadedProtocol(NamedTuple):
    """The protocol library a server holds: the package version that loaded it
    (``build``; '' when its text names none) and its text."""

    build: str
    code: str


class ProtocolLoad(NamedTuple):
    """What :func:`load_protocol` did: ``action`` is ``loaded`` (it was missing),
    ``current`` (the server held this very library), ``replaced`` (it held an older or
    equal version of other text) or ``kept`` (it held a newer version: left as it is);
    ``found`` is the build the server held before (None: none)."""

    action: Literal["loaded", "current", "replaced", "kept"]
    build: str
    found: str | None


def loaded_protocol(client: Client) -> LoadedProtocol | None:
    """The protocol library the server holds (``FUNCTION LIST ... WITHCODE``), or None."""
    replies = client.function_list(library=PROTOCOL_LIBRARY, withcode=True)
    if isinstance(replies, dict):  # a cluster client: one reply per node
        replies = next(iter(replies.values()), [])
    for lib in replies:
        entry = {text(k): v for k, v in zip(lib[0::2], lib[1::2], strict=True)}
        if text(entry["library_name"]) == PROTOCOL_LIBRARY:  # LIBRARYNAME is a pattern
            code = text(entry["library_code"])
            found = BUILD_RE.search(code)
            return LoadedProtocol(found.group(1) if found else "", code)
    return None


def load_protocol(client: Client, build: str | None = None) -> ProtocolLoad:
    """Load the protocol library of package version ``build`` (this package's by
    default): when the server has none; replacing one of an older version (numeric
    tuples compared), or of the same version with other text; never one of a newer
    version."""
    build = build or package_version()
    ours = protocol_library(build)
    for _ in range(3):  # a concurrent loader may get in between the look and the load
        held = loaded_protocol(client)
        if held is None:
            try:
                client.function_load(ours.code)
            except ResponseError as exc:
                if "already exists" not in str(exc):
                    raise
                continue
            return ProtocolLoad("loaded", build, None)
        if held.code == ours.code:
            return ProtocolLoad("current", build, held.build)
        if version_tuple(held.build) > version_tuple(build):
            return ProtocolLoad("kept", build, held.build)
        client.function_load(ours.code, replace=True)
        return ProtocolLoad("replaced", build, held.build)
    raise ScriptError(f"{PROTOCOL_LIBRARY}: loaded and removed by others while loading it")
