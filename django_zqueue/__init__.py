"""django_zqueue: a Redis task queue for Django built on sorted sets.

Every waiting job has an exact position in line (rank) and score, read in O(log N).
"""

from __future__ import annotations

from .version import __version__

__all__ = [
    "Batch",
    "BatchProgress",
    "Chunk",
    "ChunkFailed",
    "ConfigurationError",
    "CorruptResult",
    "DuplicateJob",
    "InvalidArgument",
    "Job",
    "JobContext",
    "JobEnded",
    "JobInfo",
    "Message",
    "PayloadTooLarge",
    "Queue",
    "QueueFull",
    "QueueUnavailable",
    "RedisFull",
    "ScanResult",
    "SignalRefused",
    "Signature",
    "Task",
    "UnknownQueue",
    "Workflow",
    "ZQueueError",
    "__version__",
    "batch",
    "chain",
    "chord",
    "current_chunk",
    "current_job",
    "get_queue",
    "group",
    "optional",
    "task",
]

# Importing these modules does not touch settings or Redis: safe before django.setup().
from .exceptions import (
    ConfigurationError,
    CorruptResult,
    DuplicateJob,
    InvalidArgument,
    JobEnded,
    PayloadTooLarge,
    QueueFull,
    QueueUnavailable,
    RedisFull,
    SignalRefused,
    UnknownQueue,
    ZQueueError,
)
from .queue import JobInfo, Message, Queue, ScanResult, get_queue
from .tasks.chunk import Chunk, ChunkFailed, current_chunk
from .tasks.context import JobContext, current_job
from .tasks.task import Job, Signature, Task, task
from .tasks.workflows import Batch, BatchProgress, Workflow, batch, chain, chord, group, optional

#: modules users import from the package root (``from django_zqueue import durable``),
#: where they live; imported when first asked for (importing the package stays light)
_MODULES = {
    "durable": "django_zqueue.tasks.durable",
    "schedules": "django_zqueue.tasks.schedules",
    "outbox": "django_zqueue.tasks.outbox",
    "embedded": "django_zqueue.engine.redis.embedded",
}


def __getattr__(name: str) -> object:
    if name in _MODULES:
        import importlib

        return importlib.import_module(_MODULES[name])
    raise AttributeError(f"module 'django_zqueue' has no attribute {name!r}")
