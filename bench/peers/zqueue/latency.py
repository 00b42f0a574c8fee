from _common import ARGS as a
from _common import noop, worker_cmd
from benchlib import bench_latency, selected

if selected(a, "x1"):
    bench_latency(
        "zqueue",
        a.db,
        "x1",
        [worker_cmd()],
        lambda t: noop.enqueue(t),
        note="zqueue_worker defaults (blocking BLPOP on the notify list)",
    )
