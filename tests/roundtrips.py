"""Counting round trips to Redis: every request redis-py writes to a server socket (a
single command, or a whole pipeline) goes through ``send_packed_command`` of its
connection. Nothing is changed: the real server answers; the requests are only noted."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from redis.connection import AbstractConnection


def _head(command: Any) -> str:
    """The name of a request's first command, for a failing assertion's message."""
    data = bytes(command) if isinstance(command, bytes | bytearray) else b"".join(command)
    words = [w for w in data.split(b"\r\n") if w and w[:1] not in (b"*", b"$")]
    return words[0].decode(errors="replace") if words else ""


#: what a new connection sends before its first request (on a Redis Cluster, the first
#: request to a node opens one), and the health check's PING that redis-py sends first on
#: a connection idle for 30 s: not counted
HANDSHAKE = {"HELLO", "CLIENT", "AUTH", "SELECT", "READONLY", "PING"}


@contextlib.contextmanager
def round_trips() -> Iterator[list[str]]:
    """``with round_trips() as sent:`` ... ``len(sent)``: the requests sent inside the
    block by any client of this process (each noted by its first command). The test
    Redis is shared: after another process's ``SCRIPT FLUSH``, a NOSCRIPT reply makes the
    client load the scripts and send the request again; those loads and that second
    sending are not noted, nor a new connection's handshake or a health check
    (:data:`HANDSHAKE`)."""
    sent: list[str] = []
    reloading = [False]
    original = AbstractConnection.send_packed_command

    def noting(self: AbstractConnection, command: Any, check_health: bool = True) -> None:
        head = _head(command)
        if head in HANDSHAKE:
            pass
        elif head == "SCRIPT":  # NOSCRIPT: another test process flushed the scripts
            reloading[0] = True
        elif reloading[0]:  # the request sent again once they are loaded
            reloading[0] = False
        else:
            sent.append(head)
        original(self, command, check_health)

    AbstractConnection.send_packed_command = noting  # type: ignore[method-assign]
    try:
        yield sent
    finally:
        AbstractConnection.send_packed_command = original  # type: ignore[method-assign]
