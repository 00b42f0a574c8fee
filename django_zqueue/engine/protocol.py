"""The engine's wire-protocol verbs (``engine.protocol``): a queue set up for producers
in other languages (docs/protocol.md), and what its Redis holds of it."""

from __future__ import annotations

from redis.exceptions import ResponseError

from ..events import kv, log
from ..exceptions import ProtocolError
from .base import Core
from .records import text
from .redis.connection import unavailable_as_error
from .scripts import LoadedProtocol, ProtocolLoad, load_protocol, loaded_protocol
from .scripts.calls import on_library_lost
from .scripts.source import PROTOCOL_VERSION


class WireProtocol:
    """The wire-protocol verbs of one queue's engine (``engine.protocol``)."""

    # held weakly by the library-lost hook (on_library_lost): as long as its engine
    __slots__ = ("__weakref__", "_engine")

    def __init__(self, engine: Core) -> None:
        self._engine = engine

    def policy(self) -> dict[str, str]:
        """The queue's policy as producers in other languages read it (its proto hash,
        docs/protocol.md)."""
        e = self._engine
        p = e.policy
        return {
            "v": str(PROTOCOL_VERSION),
            "mode": p.mode,
            "aging_us": str(p.aging_us),
            "notify_cap": str(p.notify_cap),
            "max_length": str(p.max_length),
            "group_max_length": str(p.group_max_length),
            "layout": "compact" if p.compact else "json",
            "partitions": str(e.partitions),
            "max_payload_bytes": str(e.options.max_payload_bytes),
            "max_retries": str(e.options.max_retries),
        }

    def publish(self) -> ProtocolLoad:
        """Set the queue up for producers in other languages (docs/protocol.md): load the
        protocol library (:func:`~django_zqueue.engine.scripts.load_protocol`) and write the
        queue's policy to its proto hash (one HSET). While this object lives (the engine's
        ``protocol``: as long as its engine), a script call of this process that finds the
        scripts' library lost (a server restarted without persistence) puts both back
        (:meth:`restore`)."""
        e = self._engine
        with unavailable_as_error():
            try:
                loaded = load_protocol(e._client)
            except ResponseError as exc:  # no Redis Functions (Redis < 7), no permission
                raise ProtocolError(f"the protocol library was not loaded: {exc}") from exc
            fields = [x for pair in self.policy().items() for x in pair]
            e._client.hset(e._keys.proto, items=fields)
        e.proto_written = tuple(fields)
        on_library_lost(e._client, e._keys.proto, self.restore)
        return loaded

    def restore(self) -> None:
        """Load the protocol library again (as :func:`~django_zqueue.engine.scripts.load_protocol`
        does: a newer release's is kept) and write back the proto hash :meth:`publish`
        wrote; nothing when it wrote none."""
        e = self._engine
        if not e.proto_written:
            return
        load_protocol(e._client)
        e._client.hset(e._keys.proto, items=list(e.proto_written))
        log.info(kv(event="protocol_restored", queue=e.name, key=e._keys.proto))

    def key(self) -> str:
        """The name of the queue's proto hash (for the command's output)."""
        return self._engine._keys.proto

    def loaded(self) -> LoadedProtocol | None:
        """The protocol library this queue's Redis holds (None: none)."""
        with unavailable_as_error():
            return loaded_protocol(self._engine._client)

    def stored(self) -> dict[str, str]:
        """The queue's proto hash as stored ({}: not set up)."""
        with unavailable_as_error():
            raw = self._engine._client.hgetall(self._engine._keys.proto)
        return {text(k): text(v) for k, v in raw.items()}
