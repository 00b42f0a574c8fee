from _common import ARGS as a
from _common import noop, queued
from benchlib import bench_enqueue

CHUNK = 1000


def single(n):
    for _ in range(n):
        noop.enqueue(0.0)


def bulk(n):
    for i in range(0, n, CHUNK):
        noop.enqueue_many([(0.0,)] * min(CHUNK, n - i))


bench_enqueue("zqueue", a.db, a.n, "single", single, count_fn=queued, note="noop.enqueue(0.0)")
bench_enqueue(
    "zqueue",
    a.db,
    a.n,
    "bulk",
    bulk,
    count_fn=queued,
    note="noop.enqueue_many([(0.0,)] * 1000) per chunk (one publish script call per chunk)",
)
