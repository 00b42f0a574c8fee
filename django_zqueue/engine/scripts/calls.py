"""Script calls as values: a :class:`Call` (script, KEYS, ARGV and how its reply reads),
sent alone or many in one round trip (:class:`Batch`, a pipeline of plain FCALL or
EVALSHA commands), each reply read from its :class:`Pending`; the ``ZQ_*`` error
replies mapped to exceptions in one table (:data:`ERRORS`). Also what a Redis Cluster
pipeline needs to route EVALSHA by key. The builders of each script's call are in
:mod:`django_zqueue.engine.scripts`.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Generic, NamedTuple, Protocol, TypeAlias, TypeVar

from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import ClusterPipeline, RedisCluster
from redis.exceptions import NoScriptError, ResponseError

from ...events import kv, log
from ...exceptions import (
    CorruptKey,
    ProtocolError,
    QueueFull,
    ScriptArgumentError,
    ScriptError,
    SequenceExhausted,
)
from ..redis.connection import (
    UNAVAILABLE_ERRORS,
    corrupt_key,
    is_out_of_memory,
    is_wrong_type,
    redis_full,
)

Arg: TypeAlias = str | bytes | int | float


class Loader(Protocol):
    """What a :class:`Batch` needs of the scripts it sends: a client, the command that
    runs a call, and a way to load them all (:class:`~django_zqueue.engine.scripts.Scripts`);
    its ``direct`` sender, if it has one, carries the batch instead of the pipeline."""

    client: Any

    def command(self, call: Call[Any]) -> tuple[Arg, ...]: ...

    def load_all(self) -> None: ...


def is_cluster_pipeline(client: Any) -> bool:
    return isinstance(client, ClusterPipeline)


def is_cluster(client: Any) -> bool:
    """Whether ``client`` is a Redis Cluster client (sync or asyncio) or its pipeline."""
    return isinstance(client, (RedisCluster, ClusterPipeline, AsyncRedisCluster))


def is_missing(reply: Any) -> bool:
    """Whether an error reply says the server does not have the script or function
    called (Redis ran nothing): NOSCRIPT, or ``Function not found``."""
    if isinstance(reply, NoScriptError):
        return True
    # a cluster pipeline may wrap the server's error in a plain ResponseError
    return isinstance(reply, ResponseError) and (
        str(reply).startswith("NOSCRIPT") or str(reply).startswith("Function not found")
    )


#: per client: what this process wrote beside the scripts' library and puts back when a
#: server turns out to have lost that library (``on_library_lost``), by name
_LOST: weakref.WeakKeyDictionary[Any, dict[str, weakref.WeakMethod[Callable[[], None]]]] = (
    weakref.WeakKeyDictionary()
)
_LOST_LOCK = threading.Lock()


def on_library_lost(client: Any, name: str, restore: Callable[[], None]) -> None:
    """Have ``restore`` (a bound method, held weakly: it lasts as long as its object)
    called each time a script call on ``client`` finds the scripts' library missing and
    loads it again (:func:`load_library`: a server restarted without persistence, or a
    ``FUNCTION FLUSH``, lost everything loaded and written beside it). One ``restore`` per
    ``name``: a later one replaces it."""
    with _LOST_LOCK:
        _LOST.setdefault(client, {})[name] = weakref.WeakMethod(restore)


def _restore(client: Any) -> None:
    """Run the restores registered for ``client``; one that fails is logged, not raised
    (the script call that found the library missing goes on)."""
    with _LOST_LOCK:
        held = list(_LOST.get(client, {}).items())
    for name, ref in held:
        restore = ref()
        if restore is None:
            continue
        try:
            restore()
        except Exception as exc:  # Redis gone again, an ACL: the next loss tries again
            log.warning(kv(event="restore_failed", what=name, error=str(exc)))


def load_library(client: Any, code: str) -> None:
    """``FUNCTION LOAD`` the library ``code`` unless the server has it already (a library
    of the same name is the same text: its name holds the hash of its text), then put
    back what was registered with :func:`on_library_lost` for ``client`` (called when a
    script call found the library missing: the server lost what was loaded and written
    with it, whoever loaded the library again first)."""
    try:
        client.function_load(code)
    except ResponseError as exc:
        if "already exists" not in str(exc):
            raise
    _restore(client)


async def aload_library(client: Any, code: str) -> None:
    """:func:`load_library` on an asyncio client."""
    try:
        await client.function_load(code)
    except ResponseError as exc:
        if "already exists" not in str(exc):
            raise


try:  # redis-py >= 8: command routing policies
    from redis._parsers.commands import CommandPolicies, RequestPolicy, ResponsePolicy
    from redis.commands.policies import BasePolicyResolver

    _KEYED = CommandPolicies(
        request_policy=RequestPolicy.DEFAULT_KEYED, response_policy=ResponsePolicy.DEFAULT_KEYED
    )

    class _EvalshaIsKeyed(BasePolicyResolver):
        """EVALSHA is routed by its keys: redis-py's own ``determine_slot`` (first key)."""

        def __init__(self, fallback: Any = None) -> None:
            super().__init__({"core": {"evalsha": _KEYED}}, fallback)

        def with_fallback(self, fallback: Any) -> Any:
            return _EvalshaIsKeyed(fallback)

except ImportError:  # older redis-py: its cluster pipeline routes EVALSHA by key already
    _EvalshaIsKeyed = None  # type: ignore[assignment,misc]


def _route_evalsha_by_key(pipe: Any) -> None:
    """redis-py 8's cluster pipeline looks up a routing policy for each command and,
    finding none for EVALSHA, asks a node for the call's keys (``COMMAND GETKEYS``): one
    more round trip per script call in a pipeline (outside pipelines it routes EVALSHA by
    its first key, as here). Its ``RedisCluster.pipeline()`` does not pass on a client's
    resolver, so the pipeline is given one that knows EVALSHA is keyed."""
    resolver = getattr(pipe, "_policy_resolver", None)
    if _EvalshaIsKeyed is not None and resolver is not None:
        pipe._policy_resolver = _EvalshaIsKeyed(fallback=resolver)


def _command(entry: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """(args, options) of a queued pipeline command (a tuple, or redis-py's cluster
    ``PipelineCommand``)."""
    if isinstance(entry, tuple):
        return entry[0], entry[1]
    return tuple(entry.args), dict(entry.options)


T = TypeVar("T")


#: the ``ZQ_*`` error codes scripts raise, and the exception each one becomes
ERRORS: dict[str, type[ScriptError] | type[QueueFull]] = {
    SequenceExhausted.code: SequenceExhausted,
    ScriptArgumentError.code: ScriptArgumentError,
    QueueFull.code: QueueFull,
    CorruptKey.code: CorruptKey,
    ProtocolError.code: ProtocolError,
}


def script_error(script: str, exc: ResponseError) -> BaseException:
    """The exception for an error reply of ``script`` (see :data:`ERRORS`; Redis'
    ``WRONGTYPE`` is :class:`CorruptKey` too, as the scripts' own check says). A reply that
    means "Redis cannot serve this now" (READONLY, a cluster's failover states, BUSY) is
    returned as it is, for the caller's retry and ``unavailable_as_error``."""
    message = str(exc)
    if isinstance(exc, UNAVAILABLE_ERRORS) or message.startswith("BUSY"):
        return exc
    if is_out_of_memory(exc):  # Redis at maxmemory: RedisFull, with the fix
        return redis_full(exc)
    if QueueFull.code in message:  # an answer to the caller, not a fault: its own words
        said = message[message.index(QueueFull.code) + len(QueueFull.code) + 2 :]
        return QueueFull(said.split(" script: ")[0].strip())
    for code, cls in ERRORS.items():
        if code in message:
            return cls(f"{script}: {message}")
    if is_wrong_type(exc):  # a command of the script met a key of another type
        return corrupt_key(exc, f"script {script} failed")
    return ScriptError(f"script {script} failed: {message}")


class Call(NamedTuple, Generic[T]):
    """One script call, not yet sent: the script, its KEYS and ARGV, and how its reply
    reads (:meth:`result`)."""

    script: str
    keys: tuple[str, ...]
    args: tuple[Arg, ...]
    read: Callable[[Any], T]

    def result(self, reply: Any) -> T:
        """The typed result of ``reply``; an error reply raises its mapped exception
        (connection errors are raised as they are)."""
        if isinstance(reply, ResponseError) and not is_missing(reply):
            error = script_error(self.script, reply)
            if error is reply:
                raise reply
            raise error from reply
        if isinstance(reply, BaseException):
            raise reply
        return self.read(reply)


_UNREAD: Any = object()


class Pending(Generic[T]):
    """The reply of a call sent in a :class:`Batch`, once the batch is sent."""

    __slots__ = ("_value", "call", "reply")

    def __init__(self, call: Call[T]) -> None:
        self.call = call
        self.reply: Any = None
        self._value: Any = _UNREAD

    def result(self) -> T:
        if self._value is _UNREAD:  # read once: a list result is read item by item
            self._value = self.call.result(self.reply)
        value: T = self._value
        return value

    @property
    def failed(self) -> BaseException | None:
        """The error reply, if the call failed (then :meth:`result` raises it)."""
        return self.reply if isinstance(self.reply, BaseException) else None


class Sink(Protocol):
    """Where script calls are queued to be sent in one round trip: a :class:`Batch`
    (redis-py's sync pipeline), or :class:`Calls` (sent by another client)."""

    def add(self, call: Call[T]) -> Pending[T]: ...


class Calls:
    """Script calls collected to be sent by another client (the event-loop lane's
    asyncio pipeline, :meth:`AsyncQueue.send`): :meth:`add` as :class:`Batch` does;
    :meth:`settle` hands each :class:`Pending` its reply, in order, once they are sent."""

    __slots__ = ("_pending", "calls")

    def __init__(self) -> None:
        self.calls: list[Call[Any]] = []
        self._pending: list[Pending[Any]] = []

    def add(self, call: Call[T]) -> Pending[T]:
        pending = Pending(call)
        self.calls.append(call)
        self._pending.append(pending)
        return pending

    def settle(self, replies: Sequence[Any]) -> None:
        """The replies of :attr:`calls`, in order (errors as exception objects)."""
        if len(replies) != len(self._pending):
            raise ValueError(f"{len(replies)} replies for {len(self._pending)} calls")
        for pending, reply in zip(self._pending, replies, strict=True):
            pending.reply = reply


class Batch:
    """Calls sent in one round trip: a non-transactional pipeline whose script calls are
    plain EVALSHA (redis-py would check ``SCRIPT EXISTS`` before each pipeline holding
    ``Script`` calls: one more round trip, a third of a worker's time on the hot path).

    After a ``SCRIPT FLUSH``, the calls that got NOSCRIPT (Redis ran nothing for them) are
    sent again, alone, once the scripts are loaded; every other reply is kept as it came.
    ``pipe`` may also carry plain commands (a BLPOP before a claim)."""

    def __init__(self, scripts: Loader) -> None:
        self.scripts = scripts
        self.pipe: Any = scripts.client.pipeline(transaction=False)
        if is_cluster_pipeline(self.pipe):
            _route_evalsha_by_key(self.pipe)
        self._pending: list[tuple[int, Pending[Any]]] = []
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def add(self, call: Call[T]) -> Pending[T]:
        """Queue ``call``; its result is read from the returned :class:`Pending` after
        :meth:`send`."""
        self.pipe.execute_command(*self.scripts.command(call))
        pending = Pending(call)
        self._pending.append((self._size, pending))
        self._size += 1
        return pending

    def command(self, name: str, *args: Any, **options: Any) -> int:
        """Queue a plain command (e.g. ``blpop``); returns its index in :meth:`send`'s list."""
        getattr(self.pipe, name)(*args, **options)
        self._size += 1
        return self._size - 1

    def send(self) -> list[Any]:
        """Run the batch; every reply in order (errors as exception objects, also set on
        each :class:`Pending`). Connection errors are raised."""
        if not self._size:
            return []
        cluster = is_cluster_pipeline(self.pipe)
        queued = self.pipe._execution_strategy.command_queue if cluster else self.pipe.command_stack
        stack = [_command(c) for c in queued]
        direct = None if cluster else getattr(self.scripts, "direct", None)
        if direct is None:
            replies = list(self.pipe.execute(raise_on_error=False))
        else:  # the same request and replies, without redis-py's pipeline path
            replies = direct.execute_many(stack)
            self.pipe.reset()
        missing = [i for i, r in enumerate(replies) if is_missing(r)]
        if missing:
            self.scripts.load_all()
            again = Batch(self.scripts)
            calls = dict(self._pending)
            for i in missing:
                args, options = stack[i]
                if i in calls:  # (loading may have turned FCALL into EVALSHA: maxmemory)
                    args = self.scripts.command(calls[i].call)
                again.pipe.pipeline_execute_command(*args, **options)
                again._size += 1
            for i, reply in zip(missing, again.send(), strict=True):
                replies[i] = reply
        for i, pending in self._pending:
            pending.reply = replies[i]
        return replies
