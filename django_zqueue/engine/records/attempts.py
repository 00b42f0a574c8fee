"""The errors of a job's attempts, as the ``errors`` hash keeps them (``lua/_attempts.lua``).

A job's field holds ``zqa1:`` and a JSON array of its last :data:`ATTEMPTS_KEPT` errors,
oldest first: ``{"n": attempt, "t": ms, "c": consumer, "e": text}`` (``n`` and ``c`` when
known). Each text keeps its first :data:`ATTEMPT_HEAD` and last :data:`ATTEMPT_TAIL` bytes
around a marker (``[… N bytes cut …]``). A value without the prefix (plain text: written
by an older version) reads as one attempt whose number and time are not known; an empty
value (or none) is no attempt.

A job kept in the history of finished jobs keeps the value it had when it ended in the
``er`` field of its kept record's head (``lua/_history.lua``); ``info.lua`` returns it in
place of the hash's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

#: attempts whose errors a job keeps (the oldest is dropped first)
ATTEMPTS_KEPT = 10
#: bytes kept of the start and of the end of an error text longer than their sum
ATTEMPT_HEAD = 1024
ATTEMPT_TAIL = 3072
#: what starts a value in the current form
PREFIX = b"zqa1:"


@dataclass(frozen=True, slots=True)
class AttemptError:
    """The error of one attempt of a job."""

    text: str
    attempt: int | None = None  # its delivery number (1 = the first run); None: not known
    at_ms: int | None = None  # when it was recorded (Redis TIME); None: not known
    consumer: str | None = None  # the consumer that ran it, when known

    @property
    def first_line(self) -> str:
        return next(iter(self.text.splitlines()), "")

    @property
    def at(self) -> datetime | None:
        if self.at_ms is None:
            return None
        return datetime.fromtimestamp(self.at_ms / 1000, tz=UTC)


def _text(value: object) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def _entry(item: object) -> AttemptError | None:
    if not isinstance(item, dict):
        return None
    consumer = item.get("c")
    return AttemptError(
        text=_text(item.get("e")),
        attempt=_int(item.get("n")),
        at_ms=_int(item.get("t")),
        consumer=None if consumer is None else _text(consumer),
    )


def decode(raw: bytes | str | None) -> tuple[AttemptError, ...]:
    """The attempts of one ``errors`` value, oldest first (empty for None or an empty
    value: a job that never failed has no entry)."""
    if not raw:
        return ()
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogateescape")
    if data.startswith(PREFIX):
        try:
            items = json.loads(data[len(PREFIX) :].decode("utf-8", "replace"))
        except ValueError:
            items = None
        if isinstance(items, list):
            found = [e for e in map(_entry, items) if e is not None]
            if found:
                return tuple(found)
    return (AttemptError(data.decode("utf-8", "replace")),)


def last_error(raw: bytes | str | None) -> str | None:
    """The text of the last attempt's error of one ``errors`` value (None: none)."""
    found = decode(raw)
    return found[-1].text if found else None
