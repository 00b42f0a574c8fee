"""The engine's verbs of chunk calls (``engine.chunkcalls``): which jobs a chunk task's
handler ran together in one call (docs/tasks.md, "Chunk tasks"), so the admin shows a
member's page with the others of its call.

Two kinds of key, each with a TTL (the longer of the queue's ``finished_ttl`` and
``dead_letter_ttl``, plus a day: as long as the admin shows the job):

- ``{p:q}:chunk:<token>`` (:meth:`QueueKeys.chunk_call`, in the shard of the call's
  first job): STRING, the JSON list of the call's job tags, in the call's order;
  ``token`` the first job's delivery token (unique in its shard).
- ``{p:q}:chunkof:<id>`` (:meth:`QueueKeys.chunk_of`, in the job's own shard): STRING,
  the JSON ``[first tag, token]`` of the job's latest call: written again at each call,
  so after a retry it names the call that ran the job last.

A job's record is not touched (it goes at the ack; these outlive it). Each verb is one
round trip per shard it touches; a job run before these keys existed, or whose keys
expired, has no call (None)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .base import Core
from .redis.connection import unavailable_as_error

#: the keys of a call outlive the job's history by this margin (ms): a day
KEEP_MARGIN_MS = 86_400_000
#: most tags of one call kept (a chunk's ``size`` is at most 1,000: conf)
MAX_MEMBERS = 1000


class ChunkCalls:
    """The chunk call verbs of one queue's engine (``engine.chunkcalls``)."""

    __slots__ = ("_engine",)

    def __init__(self, engine: Core) -> None:
        self._engine = engine

    def keep_ms(self) -> int:
        """The TTL of the keys of a call (see the module docstring)."""
        o = self._engine.options
        return int(max(o.finished_ttl, o.dead_letter_ttl) * 1000) + KEEP_MARGIN_MS

    def record(self, token: int, tags: Sequence[str]) -> None:
        """Record that ``tags`` (1 to ``MAX_MEMBERS``, the first one's delivery ``token``)
        run in one handler call: one pipeline, ``len(tags) + 1`` ``SET ... PX``."""
        if not tags:
            return
        tags = list(tags[:MAX_MEMBERS])
        e, ttl = self._engine, self.keep_ms()
        first = tags[0]
        pointer = json.dumps([first, int(token)], ensure_ascii=False)
        with unavailable_as_error():
            pipe = e._client.pipeline(transaction=False)
            pipe.set(
                e._keys_for(first).chunk_call(str(int(token))),
                json.dumps(tags, ensure_ascii=False),
                px=ttl,
            )
            for tag in tags:
                pipe.set(e._keys_for(tag).chunk_of(tag), pointer, px=ttl)
            pipe.execute()

    def members(self, tag: str) -> list[str] | None:
        """The tags of the jobs of job ``tag``'s latest handler call, in the call's order
        (``tag`` among them); None when none is recorded. Two round trips."""
        e = self._engine
        with unavailable_as_error():
            raw = e._client.get(e._keys_for(tag).chunk_of(tag))
            pointer = _json(raw)
            if not (
                isinstance(pointer, list)
                and len(pointer) == 2
                and isinstance(pointer[0], str)
                and isinstance(pointer[1], int)
            ):
                return None
            first, token = pointer
            tags = _json(e._client.get(e._keys_for(first).chunk_call(str(token))))
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            return None
        return tags


def _json(raw: Any) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except (TypeError, ValueError):
        return None
