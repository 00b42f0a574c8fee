"""The history of finished jobs, filtered (``Queue.finished(task=..., ...)``, the admin's
Finished tab): by state, task, error text, arguments and the time a job ended.

Nothing in Redis is indexed by task, error or argument, so a filtered read walks the
ended jobs newest first, a page of :data:`PAGE` at a time (:func:`~.finished.read_finished`:
two round trips a page), keeps those the filter keeps, and stops at ``limit`` matches,
at a job that ended before ``since`` (the walk is newest first: none older can follow),
after :data:`MAX_LOOKED` jobs (one state of an unpartitioned queue; several states or
partitions: :data:`~.finished.MAX_ENDED_MERGED`, the deepest a merged page reaches) or
about :data:`BUDGET_S` seconds. Its result says how many jobs it looked at and whether
more remain (``next_offset`` goes on).

With an arguments text (``"user_id": 4242`` whatever the spacing; the field form
``user_id:4242``, as :mod:`.search` reads it) the walk is ``search.lua``'s instead: the
state's whole set (every ended state's when none is named) searched in Redis, about 5 µs
a job, within the same budget, at most :data:`MAX_TEXT_MATCHES` matches; the other
filters then apply to the matches, newest first, and ``offset`` counts matches.
:func:`text_matcher` is the same test in Python, on a decoded body.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..exceptions import InvalidArgument
from .finished import (
    FINISHED_STATES,
    MAX_ENDED_MERGED,
    FinishedJob,
    check_finished_state,
    finished_job,
    read_finished,
)
from .search import MAX_MATCHES, STRUCTURAL, SearchMatch, field_of, parse, search

if TYPE_CHECKING:
    from .source import Readable

#: jobs read per round trip pair
PAGE = 200
#: most jobs one filtered read looks at (one state of an unpartitioned queue)
MAX_LOOKED = 100_000
#: seconds one filtered read may spend
BUDGET_S = 1.0
#: longest task or error filter text
MAX_FILTER_TEXT = 200
#: most matches of an arguments text one filtered read collects before its other filters
MAX_TEXT_MATCHES = 10_000


def _spacing_regex(text: str) -> re.Pattern[str]:
    """``text`` as a regex that lets JSON's spacing vary around ``: , [ ] { }`` (as
    :func:`.search.spacing_pattern` does for Lua)."""
    if not STRUCTURAL.intersection(text):
        return re.compile(re.escape(text))
    compact = re.sub(r"\s*([:,\[\]{}])\s*", r"\1", text.strip())
    parts = (rf"\s*{re.escape(c)}\s*" if c in STRUCTURAL else re.escape(c) for c in compact)
    return re.compile("".join(parts))


def _at_path(node: Any, path: list[str]) -> Any:
    for seg in path:
        if isinstance(node, dict):
            node = node.get(seg)
        elif isinstance(node, list) and seg.isdigit() and int(seg) < len(node):
            node = node[int(seg)]
        else:
            return None
    return node


def _same(value: Any, want: str) -> bool:
    """As ``search.lua`` compares a field: a number numerically, a string by value,
    booleans and null by their JSON text; a list or an object never."""
    if isinstance(value, bool):
        return want == ("true" if value else "false")
    if isinstance(value, int | float):
        try:
            return float(want) == value
        except ValueError:
            return False
    if isinstance(value, str):
        return value == want
    return False


def text_matcher(text: str) -> Callable[[str, Any], bool]:
    """Whether a job (its tag, its decoded body) matches the arguments text ``text``."""
    parse(text)  # its bounds (InvalidArgument)
    regex = _spacing_regex(text)
    field = field_of(text)

    def matches(tag: str, body: Any) -> bool:
        raw = json.dumps(body, separators=(",", ":"), ensure_ascii=False, default=str)
        if regex.search(tag) or regex.search(raw):
            return True
        if field is None or not isinstance(body, dict):
            return False
        path = field[0].split(".")
        value = _at_path(body, path)
        if value is None and isinstance(body.get("kwargs"), dict):
            value = _at_path(body["kwargs"], path)
        if value is None and field[1] == "null":
            return _has_null(body, path)
        return _same(value, field[1])

    return matches


def _has_null(body: dict[str, Any], path: list[str]) -> bool:
    """Whether the body (or its ``kwargs``) holds a JSON null at ``path``."""
    last = path[-1]
    for root in (body, body.get("kwargs")):
        node = _at_path(root, path[:-1])
        if isinstance(node, dict) and last in node and node[last] is None:
            return True
        in_list = isinstance(node, list) and last.isdigit() and int(last) < len(node)
        if in_list and node[int(last)] is None:
            return True
    return False


@dataclass(frozen=True, slots=True)
class FinishedFilter:
    """What a filtered read keeps: ``task`` and ``error`` are case-insensitive
    substrings (of the task name; of a dead or expired job's last error), ``text`` the
    arguments as :mod:`.search` reads them, ``since_ms``/``until_ms`` the ms a job ended
    (inclusive; None: open)."""

    task: str = ""
    error: str = ""
    text: str = ""
    since_ms: float | None = None
    until_ms: float | None = None

    def __post_init__(self) -> None:
        if len(self.task) > MAX_FILTER_TEXT or len(self.error) > MAX_FILTER_TEXT:
            raise InvalidArgument(
                f"task and error filters are at most {MAX_FILTER_TEXT} characters"
            )
        if self.text:
            parse(self.text)
        if (
            self.since_ms is not None
            and self.until_ms is not None
            and self.since_ms > self.until_ms
        ):
            raise InvalidArgument("since must not be after until")

    @property
    def active(self) -> bool:
        return (
            bool(self.task or self.error or self.text)
            or self.since_ms is not None
            or self.until_ms is not None
        )

    def keeper(self) -> Callable[[FinishedJob], bool]:
        """The test of one listed job."""
        task, error = self.task.casefold(), self.error.casefold()
        by_text = text_matcher(self.text) if self.text else None

        def keeps(job: FinishedJob) -> bool:
            if self.until_ms is not None and job.ended_ms > self.until_ms:
                return False
            if self.since_ms is not None and job.ended_ms < self.since_ms:
                return False
            if task:
                body = job.body
                name = body.get("task") if isinstance(body, dict) else None
                if not isinstance(name, str) or task not in name.casefold():
                    return False
            if error and error not in (job.error or "").casefold():
                return False
            return by_text is None or by_text(job.tag, job.body)

        return keeps


@dataclass(frozen=True, slots=True)
class FilteredFinished:
    """The matches of a filtered read, newest first; ``looked`` jobs were read from
    ``offset``; ``more``: the walk stopped before the end (``next_offset`` goes on)."""

    jobs: list[FinishedJob]
    looked: int
    offset: int
    more: bool
    #: where the next read starts: the ended job walked next; with an arguments text
    #: (found by ``search.lua``), the number of matches already shown
    next_at: int | None = None

    @property
    def next_offset(self) -> int:
        return self.offset + self.looked if self.next_at is None else self.next_at


def read_finished_filtered(
    q: Readable,
    flt: FinishedFilter,
    state: str | None = None,
    limit: int = 50,
    offset: int = 0,
    *,
    max_looked: int | None = None,
    budget_s: float = BUDGET_S,
) -> FilteredFinished:
    """The jobs that ended in ``state`` (None: any) that ``flt`` keeps, newest first,
    walking from the ``offset``-th ended job (see the module)."""
    check_finished_state(state)
    if not 1 <= limit <= 1000 or offset < 0:
        raise InvalidArgument("limit must be in [1, 1000] and offset >= 0")
    if flt.text:
        return _by_text(q, flt, state, limit, offset, budget_s)
    merged = state is None or q.reads.partitions > 1
    most = MAX_ENDED_MERGED if merged else MAX_LOOKED
    if max_looked is not None:
        most = min(most, max_looked)
    keeps = flt.keeper()
    end = time.monotonic() + budget_s
    found: list[FinishedJob] = []
    looked, at, total = 0, offset, 0
    stop = min(offset + most, MAX_ENDED_MERGED) if merged else offset + most
    while at < stop:
        size = min(PAGE, stop - at)
        page = read_finished(q, state, at, size, errors=bool(flt.error))
        total = page.total
        for job in page.jobs:
            looked += 1
            if flt.since_ms is not None and job.ended_ms < flt.since_ms:
                return FilteredFinished(found, looked, offset, False)
            if not job.gone and keeps(job):
                found.append(job)
                if len(found) == limit:
                    return FilteredFinished(found, looked, offset, True)
        at += len(page.jobs)
        if len(page.jobs) < size:
            return FilteredFinished(found, looked, offset, False)
        if time.monotonic() >= end:
            break
    return FilteredFinished(found, looked, offset, at < total)


def _by_text(
    q: Readable, flt: FinishedFilter, state: str | None, limit: int, offset: int, budget_s: float
) -> FilteredFinished:
    """With an arguments text: the state's whole set searched by ``search.lua`` (about
    5 µs a job, in steps of 1,000), at most :data:`MAX_TEXT_MATCHES` matches, then the
    other filters on them, newest first; ``offset`` counts matches."""
    end = time.monotonic() + budget_s
    matches: list[SearchMatch] = []
    looked, complete = 0, True
    for name in FINISHED_STATES if state is None else (state,):
        cursor = None
        while complete:
            left = max(0.0, end - time.monotonic())
            got = search(q, flt.text, name, MAX_MATCHES, cursor, budget_s=left)
            matches += got.matches
            looked += got.looked
            if got.done:
                break
            cursor = got.cursor
            complete = time.monotonic() < end and len(matches) < MAX_TEXT_MATCHES
    entries = sorted(
        ((m.tag, m.state, m.score, m.shard) for m in matches),
        key=lambda e: (-e[2], e[0].encode("utf-8")),
    )
    entries = [
        e
        for e in entries
        if (flt.since_ms is None or e[2] >= flt.since_ms)
        and (flt.until_ms is None or e[2] <= flt.until_ms)
    ]
    keeps = flt.keeper()
    kept: list[FinishedJob] = []
    want = offset + limit + 1
    for lo in range(0, len(entries), PAGE):
        chunk = entries[lo : lo + PAGE]
        found = q.reads.ended_hashes(chunk, bool(flt.error))
        jobs = [finished_job(e, h) for e, h in zip(chunk, found, strict=True)]
        kept += [j for j in jobs if not j.gone and keeps(j)]
        if len(kept) >= want:
            break
    page = kept[offset : offset + limit]
    more = not complete or len(kept) > offset + limit
    return FilteredFinished(page, looked, offset, more, offset + len(page))
