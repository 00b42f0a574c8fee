"""The engine's second transport: the same script calls (built by the
:class:`~django_zqueue.engine.Engine`) sent on redis-py's asyncio client.

An :class:`AsyncTransport` wraps a queue's engine (``sync``) and owns the asyncio client:
the one given, else the running loop's for the settings
(:func:`~django_zqueue.engine.redis.aconnection.get_async_client`). The verbs on it are
:class:`~django_zqueue.engine.aio.AsyncEngine`'s."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import redis.asyncio as aredis
from redis.exceptions import ResponseError

from .. import conf
from ..exceptions import InvalidArgument, QueueUnavailable
from .redis.aconnection import get_async_client
from .redis.connection import UNAVAILABLE_ERRORS, get_client, is_out_of_memory
from .scripts import Call, aload_library, is_cluster, is_missing, script_error, source

if TYPE_CHECKING:
    from . import Engine

T = TypeVar("T")

#: the asyncio client's type (``AsyncQueue(queue, client=...)``)
AsyncClient = aredis.Redis


class AsyncTransport:
    """``sync`` (an :class:`Engine`) on an asyncio client: every method is a coroutine,
    connection errors are :class:`QueueUnavailable`."""

    def __init__(self, sync: Engine, client: aredis.Redis | None = None) -> None:
        self.sync = sync
        self._client = client

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.sync.name!r}>"

    @property
    def client(self) -> aredis.Redis:
        """The asyncio client: the one given, else the running loop's for the settings."""
        if self._client is not None:
            return self._client
        config = conf.get_config()
        if self.sync._client is not get_client(config):
            raise InvalidArgument(
                f"queue {self.sync.name!r} was built on a client of its own: give its "
                "asyncio client too, AsyncQueue(queue, client=redis.asyncio.Redis(...))"
            )
        return get_async_client(config)

    # ------------------------------------------------------------------ sending calls

    def _command(self, client: Any, call: Call[Any]) -> tuple[Any, ...]:
        """What runs ``call`` on ``client``: the sync engine's command (FCALL), or
        EVALSHA on a cluster client."""
        scripts = self.sync._scripts
        if scripts.library is not None and not is_cluster(client):
            return scripts.command(call)
        return ("EVALSHA", scripts.sha(call.script), len(call.keys), *call.keys, *call.args)

    async def _load(self, client: Any, call: Call[Any]) -> None:
        """Load what ``call`` needs on a server that has lost it."""
        library = self.sync._scripts.library
        if library is not None and not is_cluster(client):
            try:
                await aload_library(client, library.code)
                return
            except ResponseError as exc:
                if not is_out_of_memory(exc):
                    raise
            self.sync._scripts.use_evalsha()  # (FUNCTION LOAD refused at maxmemory)
        await client.script_load(source(call.script))

    async def run(self, call: Call[T]) -> T:
        """Send one script call; where the server lost the scripts (Redis ran nothing),
        load them and send it again."""
        client: Any = self.client
        cmd = self._command(client, call)
        try:
            try:
                reply = await client.execute_command(*cmd)
            except ResponseError as exc:
                if not is_missing(exc):
                    raise
                await self._load(client, call)
                reply = await client.execute_command(*self._command(client, call))
        except UNAVAILABLE_ERRORS as exc:
            raise QueueUnavailable(f"Redis is unavailable: {exc}") from exc
        except ResponseError as exc:
            error = script_error(call.script, exc)
            if error is exc:
                raise
            raise error from exc
        return call.result(reply)

    async def send(
        self, calls: Sequence[Call[Any]], *, blpop: tuple[list[str], float] | None = None
    ) -> list[Any]:
        """Send calls in one round trip (a non-transactional pipeline), after a BLPOP of
        ``blpop`` (keys, seconds) when given; the raw replies in order (errors as
        exception objects: read each with ``call.result``). A call the server had no
        script for is sent again once the scripts are loaded."""
        client: Any = self.client
        pipe = client.pipeline(transaction=False)
        if blpop is not None:
            pipe.blpop(blpop[0], timeout=blpop[1])
        commands = [self._command(client, call) for call in calls]
        for cmd in commands:
            pipe.execute_command(*cmd)
        try:
            replies = list(await pipe.execute(raise_on_error=False))
            skip = 0 if blpop is None else 1
            missing = [i for i, r in enumerate(replies[skip:]) if is_missing(r)]
            for i in missing:
                await self._load(client, calls[i])
                cmd = self._command(client, calls[i])  # (FCALL may be EVALSHA now)
                replies[skip + i] = await client.execute_command(*cmd)
        except UNAVAILABLE_ERRORS as exc:
            raise QueueUnavailable(f"Redis is unavailable: {exc}") from exc
        return replies

    async def run_all(self, calls: Sequence[Call[T]]) -> list[T]:
        """Send calls in one round trip; their results in order (the first failure raises)."""
        if len(calls) == 1:
            return [await self.run(calls[0])]
        replies = await self.send(calls)
        return [c.result(r) for c, r in zip(calls, replies, strict=True)]

    async def wait_on(self, groups: list[list[str]], seconds: float) -> bool:
        """Take a wake-up token from any list of ``groups`` (keys grouped by cluster slot,
        e.g. a worker's ``Wakeups.groups``), blocking up to ``seconds``."""
        return await wait_any(self.client, groups, seconds)

    async def wait(self, seconds: float) -> bool:
        """Take a wake-up token from any of the queue's notify lists, blocking up to
        ``seconds`` (cut to the engine's longest wait); True if one came."""
        return await wait_any(
            self.client, self.sync._notify_groups, min(seconds, self.sync.max_block)
        )


async def wait_any(client: aredis.Redis, groups: list[list[str]], seconds: float) -> bool:
    """Take a wake-up token from any list of ``groups`` (keys grouped by cluster slot),
    blocking up to ``seconds`` in all; True if one came."""
    if seconds <= 0:
        return False
    try:
        for group in groups:
            got = await client.blpop(group, timeout=max(0.01, seconds / len(groups)))
            if got is not None:
                return True
    except UNAVAILABLE_ERRORS as exc:
        raise QueueUnavailable(f"Redis is unavailable: {exc}") from exc
    return False
