"""The engine's verbs on kept results and cancel records (``engine.results``): what the
Django Tasks backend and the outbox read and write of one job."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .base import Core


class Results:
    """The result verbs of one queue's engine (``engine.results``)."""

    __slots__ = ("_engine",)

    def __init__(self, engine: Core) -> None:
        self._engine = engine

    def raw(self, tag: str) -> Any:
        """The raw value of job ``tag``'s result key (None: none kept)."""
        e = self._engine
        return e._client.get(e._keys_for(tag).result(tag))

    def store(self, tag: str, value: str, ttl_ms: int) -> None:
        """Set job ``tag``'s result key to ``value``, expiring in ``ttl_ms``."""
        e = self._engine
        e._client.set(e._keys_for(tag).result(tag), value, px=ttl_ms)

    def were_cancelled(self, tags: Sequence[str]) -> set[str]:
        """Which of ``tags`` have a cancel record kept (one round trip, none when empty)."""
        if not tags:
            return set()
        e = self._engine
        pipe = e._client.pipeline(transaction=False)
        for tag in tags:
            pipe.exists(e._keys_for(tag).cancelled(tag))
        return {tag for tag, found in zip(tags, pipe.execute(), strict=True) if found}
