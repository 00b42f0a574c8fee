"""The typed values of workflow links as they cross the layers (see docs/workflows.md).

- :class:`FlowJob`: a new job of a workflow: its :class:`~.records.NewJob`, how many
  parents it waits for, its dependents and its parents (``wf_publish.lua``).
- :class:`Ref`: one job of any queue, ``(queue, tag)``; :class:`Kid`: a dependent and the
  index of this parent among its parents (1-based: the place of its result).
- :class:`Resolution`: the end of one parent, to apply to one dependent
  (``wf_resolve.lua``); :class:`Resolved`: what a call of it did.
- :class:`Links`: a job's links as the read side shows them.

The links of a job live in its ``wf:<id>`` hash: ``kids`` and ``par`` (JSON lists),
``need``, ``got``, ``r<i>`` (the result parent i passed on) and ``opt`` (the places that
take any end of their parent: ``*`` every place, or a JSON list; such a place's ``r<i>``
is the marker ``!<reason>`` when its parent failed). Only this module and the scripts
know those fields.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ...conf import bounds
from . import NewJob, text

#: most parents a job may wait for, and most dependents a job may have
MAX_LINKS = bounds.MAX_LINKS
#: largest result (JSON bytes) a job passes on to its dependents
MAX_PASSED_BYTES = 65_536
#: the fields of a ``wf:<id>`` hash that count its parents (read with ``HMGET``)
COUNT_FIELDS = ("need", "got")
#: ... and ``opt``: whether every parent counts however it ends (a batch's progress)
PROGRESS_FIELDS = ("need", "got", "opt")
#: how a parent ended, as a dependent that takes any end sees it (the batch summary's keys)
OUTCOMES = ("succeeded", "dead", "cancelled", "expired")
#: the reason in a failure marker (``!<reason>``) -> its outcome
_REASONS = {
    "": "dead",
    "dead": "dead",
    "cancelled": "cancelled",
    "deleted": "cancelled",
    "expired": "expired",
}


@dataclass(frozen=True)
class OptionalParent:
    """A parent whose failure does not stop its dependent (``optional(job)`` in
    ``depends_on``): the dependent runs once it has ended, however it ended."""

    parent: Any


class Ref(NamedTuple):
    """A job of any queue."""

    queue: str
    tag: str


class Kid(NamedTuple):
    """A dependent of a job: ``place`` is the parent's place among the dependent's parents."""

    queue: str
    tag: str
    place: int


class FlowJob(NamedTuple):
    """A new job of a workflow (``wf_publish.lua``); ``optional``: the places (1-based)
    of the parents whose any end counts (their failure passes None), ``any_end``: every
    parent's (a batch's ``on_complete``)."""

    job: NewJob
    parents: tuple[Ref, ...] = ()
    kids: tuple[Kid, ...] = ()
    optional: tuple[int, ...] = ()
    any_end: bool = False

    @property
    def need(self) -> int:
        return len(self.parents)

    def link_fields(self) -> dict[str, Any]:
        """The job's workflow fields in its spec (``wf_publish.lua``): ``need``, and
        ``kids`` and ``parents`` as JSON, each only when there are some."""
        out: dict[str, Any] = {}
        if self.parents:
            out["need"] = self.need
            out["parents"] = json.dumps([list(p) for p in self.parents])
        if self.kids:
            out["kids"] = json.dumps([list(k) for k in self.kids])
        if self.parents and self.any_end:
            out["opt"] = "*"
        elif self.parents and self.optional:
            out["opt"] = json.dumps(sorted(set(self.optional)))
        return out


class Resolution(NamedTuple):
    """The end of parent ``parent`` (``place`` among ``child``'s parents), for ``child``."""

    child: str
    place: int
    end: str  # '1' succeeded, '0' failed, 'r' revived (waits again)
    result: str  # JSON passed on ('' unless it succeeded)
    parent: str  # its tag, for the error text of a failed dependency


class Resolved(NamedTuple):
    """What one ``wf_resolve`` call did; ``cascade``: dependents it buried that have
    dependents of their own (their outbox entries are to be dispatched next)."""

    released: int
    killed: int
    revived: int
    cascade: tuple[str, ...]

    @classmethod
    def from_reply(cls, reply: Sequence[Any]) -> Resolved:
        return cls(int(reply[0]), int(reply[1]), int(reply[2]), tuple(text(x) for x in reply[3:]))


class Links(NamedTuple):
    """A job's workflow links (read side): its parents, its dependents, how many parents
    it waits for and how many have passed their result."""

    parents: tuple[Ref, ...]
    kids: tuple[Kid, ...]
    need: int
    got: int

    @classmethod
    def decode(cls, raw: Mapping[Any, Any]) -> Links | None:
        """From the ``wf:<id>`` hash (HGETALL); None when it is empty. Entries that do not
        decode are left out."""
        if not raw:
            return None
        fields = {text(k): text(v) for k, v in raw.items()}

        def rows(name: str, width: int) -> list[list[Any]]:
            try:
                value = json.loads(fields.get(name, "[]"))
            except ValueError:
                return []
            if not isinstance(value, list):
                return []
            return [r for r in value if isinstance(r, list) and len(r) == width]

        def num(name: str) -> int:
            try:
                return int(fields.get(name, "0"))
            except ValueError:
                return 0

        return cls(
            tuple(Ref(str(q), str(t)) for q, t in rows("par", 2)),
            tuple(Kid(str(q), str(t), int(i)) for q, t, i in rows("kids", 3)),
            num("need"),
            num("got"),
        )


def link_counts(values: Sequence[Any]) -> Links | None:
    """A job's links without its parents and dependents, from ``HMGET wf:<id>`` of
    :data:`COUNT_FIELDS` (need, got); None when the hash holds neither."""
    return Links.decode({k: v for k, v in zip(COUNT_FIELDS, values, strict=True) if v is not None})


def kids_of(raw: bytes | str | None) -> list[Kid]:
    """The ``kids`` field of a ``wf:<id>`` hash (None or undecodable: none)."""
    return kids_or_none(raw) or []


def kids_or_none(raw: bytes | str | None) -> list[Kid] | None:
    """The ``kids`` field of a ``wf:<id>`` hash; None when it is there but does not decode
    to a list (corrupt: the dependents must be found from their own links)."""
    if raw is None:
        return []
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, list):
        return None
    return [
        Kid(str(r[0]), str(r[1]), int(r[2]))
        for r in value
        if isinstance(r, list) and len(r) == 3 and isinstance(r[2], int)
    ]


class Ended(NamedTuple):
    """How one parent ended, as its dependent received it: ``outcome`` one of
    :data:`OUTCOMES`, ``result`` its result (None unless it succeeded)."""

    queue: str
    tag: str
    outcome: str
    result: Any


def passed_ends(raw: Mapping[Any, Any]) -> list[Ended]:
    """How each of the job's parents ended, in order (from its ``wf:<id>`` hash);
    ``LookupError`` when one has not."""
    fields = {text(k): v for k, v in raw.items()}
    need = int(fields.get("need", 0))
    try:
        refs = json.loads(fields.get("par", "[]"))
    except ValueError:
        refs = []
    if not isinstance(refs, list) or len(refs) != need:
        refs = [["", ""]] * need
    out = []
    for i in range(1, need + 1):
        value = fields.get(f"r{i}")
        if value is None:
            raise LookupError(f"the result of parent {i} of {need} is missing")
        value = text(value)
        ref = refs[i - 1] if isinstance(refs[i - 1], list) and len(refs[i - 1]) == 2 else ["", ""]
        if value.startswith("!"):  # a failure marker: an optional place (wf_resolve.lua)
            out.append(Ended(str(ref[0]), str(ref[1]), _REASONS.get(value[1:], "dead"), None))
        else:
            out.append(Ended(str(ref[0]), str(ref[1]), "succeeded", json.loads(value)))
    return out


def passed_results(raw: Mapping[Any, Any]) -> list[Any]:
    """The results passed on by the job's parents, in order (from its ``wf:<id>``
    hash; None for an optional parent that failed); ``LookupError`` when one is
    missing."""
    need = int(raw.get(b"need", raw.get("need", 0)))
    out = []
    for i in range(1, need + 1):
        value = raw.get(f"r{i}".encode(), raw.get(f"r{i}"))
        if value is None:
            raise LookupError(f"the result of parent {i} of {need} is missing")
        out.append(None if text(value).startswith("!") else json.loads(value))
    return out


def summary(ends: Sequence[Ended]) -> dict[str, Any]:
    """What a batch's callback receives: ``total``, the tags per outcome (``succeeded``,
    ``dead``, ``cancelled``, ``expired``, each in the order given) and ``results``
    (tag -> result of each succeeded member)."""
    out: dict[str, Any] = {"total": len(ends), **{o: [] for o in OUTCOMES}}
    out["results"] = {}
    for e in ends:
        out[e.outcome].append(e.tag)
        if e.outcome == "succeeded":
            out["results"][e.tag] = e.result
    return out
