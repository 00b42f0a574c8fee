"""Which task names the queued jobs of a queue call, with their counts
(``queue.read.task_names()``): what ``check --deploy`` compares with the registered
tasks, so that a renamed task's stranded jobs are found before a worker buries them.

Bounded: a queue may hold millions of jobs, so the names are read from the first
``sample`` jobs in line and the first ``sample`` delayed jobs (those due first), two
pages and one round trip of records each; :attr:`TaskNames.exact` says whether every
queued job was read."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..exceptions import InvalidArgument

if TYPE_CHECKING:
    from .source import Readable

#: most jobs of one state read
MAX_SAMPLE = 5000
#: the states whose jobs are "queued": they will run
QUEUED = ("ready", "delayed")


@dataclass(frozen=True, slots=True)
class TaskNames:
    """``counts``: task name -> jobs among those read; ``read``: the jobs read;
    ``queued``: the jobs ready and delayed; ``exact``: every one of them was read."""

    counts: dict[str, int]
    read: int
    queued: int

    @property
    def exact(self) -> bool:
        return self.read >= self.queued


def task_names(queue: Readable, sample: int = 1000, skip: Collection[str] = ()) -> TaskNames:
    """The task names of the first ``sample`` jobs ready and delayed of ``queue`` (see
    the module docstring); a body holding a key of ``skip`` (another runner's jobs, as
    Django Tasks' ``django_task``) or no ``task`` name is left out. Four round trips."""
    if isinstance(sample, bool) or not isinstance(sample, int) or not 1 <= sample <= MAX_SAMPLE:
        raise InvalidArgument(f"sample must be an int in [1, {MAX_SAMPLE}]")
    counts: Counter[str] = Counter()
    read = 0
    for state in QUEUED:
        page = queue.reads.state_page(state, 0, sample)
        infos = queue.reads.infos([(tag, p) for tag, _, p in page])
        read += len(infos)
        for info in infos:
            body = info.body
            if not isinstance(body, dict) or any(k in body for k in skip):
                continue
            name = body.get("task")
            if isinstance(name, str):
                counts[name] += 1
    got = queue.reads.state_counts()
    return TaskNames(dict(counts), read, got["ready"] + got["delayed"])
