"""The engine's verbs of strict order per key (``engine.order``; docs/job-control.md,
"Strict order per key"): the keys that hold jobs back (:meth:`Ordering.blocked`), the
release of one (:meth:`Ordering.unblock`) and a waiting job's place in its key's line
(:meth:`Ordering.rank`, ``lua/rank_key.lua``). The claim rule itself is ``claim.lua``'s
(``lua/_order.lua``). An ordering key is refused on a partitioned queue, so these read
the queue's one shard."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..conf.bounds import MAX_PAGE, ordering_key_problem
from ..exceptions import InvalidArgument
from .records import validate
from .redis.connection import unavailable_as_error

if TYPE_CHECKING:
    from .base import Core
    from .scripts import Call

__all__ = ["RANK_MOST", "BlockedKey", "Ordering", "read_rank"]

#: the states a holder can be read in, by the set that holds it
_STATES = ("ready", "delayed", "leased", "dead")

#: the most entries of one key :meth:`Ordering.rank` reads in each of oaside and okeyed
#: (its read blocks Redis O(entries): about 4 ms for 1,000)
RANK_MOST = 1000


@dataclass(frozen=True, slots=True)
class BlockedKey:
    """A key with jobs set aside behind it: its holder (None when none is recorded), the
    holder's state (``ready``, ``delayed``, ``leased``, ``dead``; None when it has ended:
    the next claim brings the key's next job back) and how many jobs wait behind it."""

    key: str
    holder: str | None
    holder_state: str | None
    waiting: int


class Ordering:
    """``engine.order``: reads and one operator action on the keys of strict order."""

    def __init__(self, core: Core) -> None:
        self._core = core

    def blocked(self, limit: int = 50, after: str = "") -> list[BlockedKey]:
        """Up to ``limit`` (1..1000) keys with jobs set aside, in key order, after the key
        ``after`` ('' = from the first): ``limit`` + 2 round trips."""
        if not (isinstance(limit, int) and 1 <= limit <= MAX_PAGE):
            raise InvalidArgument(f"limit must be an integer in [1, {MAX_PAGE}]")
        c, k = self._core._client, self._core._keys
        keys: list[bytes] = []
        low = b"(" + after.encode("utf-8") + b"\x01" if after else b"-"
        with unavailable_as_error():
            while len(keys) < limit:
                got = c.zrangebylex(k.oaside, low, b"+", start=0, num=1)
                if not got:
                    break
                key = _bytes(got[0]).split(b"\0", 1)[0]
                keys.append(key)
                low = b"(" + key + b"\x01"
            if not keys:
                return []
            pipe = c.pipeline(transaction=False)
            for key in keys:
                pipe.hget(k.ohold, key)
                pipe.zlexcount(k.oaside, b"[" + key + b"\0", b"(" + key + b"\x01")
            read = pipe.execute()
            # a holder is named "<tag>\0<enqueued ms>" (lua/_order.lua)
            holders = [
                None if read[2 * i] is None else _bytes(read[2 * i]).split(b"\0", 1)[0]
                for i in range(len(keys))
            ]
            pipe = c.pipeline(transaction=False)
            for h in holders:
                for state in _STATES:
                    pipe.zscore(getattr(k, state), h or b"")
            scores = pipe.execute()
        out = []
        for i, key in enumerate(keys):
            h = holders[i]
            found = [s for j, s in enumerate(_STATES) if scores[4 * i + j] is not None]
            out.append(
                BlockedKey(
                    key=key.decode("utf-8", "replace"),
                    holder=None if h is None else h.decode("utf-8", "replace"),
                    holder_state=found[0] if h is not None and found else None,
                    waiting=int(read[2 * i + 1]),
                )
            )
        return out

    def rank(self, tag: str) -> int | None:
        """Job ``tag``'s 0-based place among the waiting jobs of its ordering key, in the
        order they will run (its key's holder first, then by place in line); None when
        it is not waiting (running, delayed, ended, no such job). One round trip.
        ``InvalidArgument`` when the job has no ordering key; ``LookupError`` when the
        answer is unknown: the job was enqueued before this index existed (or is a dead
        job of the key requeued after the key went on), or its key has more than
        ``RANK_MOST`` jobs indexed or set aside."""
        tag = validate.tag(tag)
        return read_rank(tag, self._core.run(self.rank_call(tag)))

    def rank_call(self, tag: str) -> Call[list[int]]:
        """The ``rank_key`` call of :meth:`rank` (its reply read by :func:`read_rank`),
        for the asyncio client."""
        return self._core._shard_for(tag).rank_key(tag, RANK_MOST)

    def unblock(self, key: str) -> bool:
        """Let key ``key`` go on without its holder: its record of a holder is removed, so
        the next claim brings the key's next job back to the line. The holder itself is
        left as it is (a dead one stays in the dead letters; requeued, it waits behind
        the key's new holder). True when a holder was recorded."""
        problem = ordering_key_problem(key)
        if problem:
            raise InvalidArgument(problem)
        with unavailable_as_error():
            return bool(self._core._client.hdel(self._core._keys.ohold, key))


def read_rank(tag: str, got: list[int]) -> int | None:
    """:meth:`Ordering.rank`'s answer from ``rank_key.lua``'s reply ``got``."""
    if got[0] == 0:
        return got[1]
    if got[0] == 1:
        return None
    if got[0] == 2:
        raise InvalidArgument(f"job {tag!r} has no ordering key: no rank within a key")
    why = "it is in no index of its key's jobs" if got[0] == 3 else "its key has too many"
    raise LookupError(f"the rank of job {tag!r} within its key is unknown: {why}")


def _bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8")
