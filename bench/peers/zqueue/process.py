from _common import ARGS as a
from _common import noop, worker_cmd
from benchlib import run_process_variants

CHUNK = 1000


def prefill(n):
    for i in range(0, n, CHUNK):
        noop.enqueue_many([(0.0,)] * min(CHUNK, n - i))


P20 = ("--prefetch", "20")
#: a worker that runs the queued ``tasks.noop`` jobs as an ``async def`` task (atasks.py)
ASYNC = {"ZQBENCH_TASK_MODULES": "atasks"}
run_process_variants(
    "zqueue",
    a,
    [
        {
            "name": "x1",
            "workers": 1,
            "cmds": [worker_cmd()],
            "headline": "1w",
            "note": "zqueue_worker defaults: --concurrency 1 --prefetch 1, INFO log line per job",
        },
        {
            "name": "x1-prefetch20",
            "workers": 1,
            "cmds": [worker_cmd(*P20)],
            "note": "--prefetch 20",
        },
        {
            "name": "x1-c4-prefetch20",
            "workers": 1,
            "cmds": [worker_cmd("--concurrency", "4", *P20)],
            "note": "--concurrency 4 --prefetch 20 (4 consumer threads)",
            "extra": True,
        },
        {
            "name": "x1-async",
            "workers": 1,
            "cmds": [worker_cmd()],
            "env": ASYNC,
            "note": "the job as an async def task: the event-loop lane, its default 100 slots",
            "extra": True,
        },
        {
            "name": "x1-async-c50",
            "workers": 1,
            "cmds": [worker_cmd("--async-concurrency", "50")],
            "env": ASYNC,
            "note": "async def task, --async-concurrency 50 (as BullMQ's c50)",
            "extra": True,
        },
        {
            "name": "x2",
            "workers": 2,
            "cmds": [worker_cmd()] * 2,
            "headline": "2w",
            "note": "two independent zqueue_worker processes, defaults",
        },
        {
            "name": "x2-prefetch20",
            "workers": 2,
            "cmds": [worker_cmd(*P20)] * 2,
            "note": "two processes, --prefetch 20",
        },
        {
            "name": "p2-prefetch20",
            "workers": 2,
            "cmds": [worker_cmd("--processes", "2", *P20)],
            "note": "--processes 2 --prefetch 20 (one master forking 2 workers)",
            "extra": True,
        },
    ],
    prefill,
)
