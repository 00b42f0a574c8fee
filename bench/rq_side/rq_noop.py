"""The RQ side of ``python -m bench.isolation``: the same no-op job (one INCR), and a
runner that enqueues N of them and drains them with one ``rq worker --burst``.

Runs in a virtualenv with rq (``--rq-python``), never imported by django_zqueue.

    python rq_noop.py REDIS_URL N WORKER_CLASS   ->  prints one JSON line
"""

import json
import os
import subprocess
import sys
import time

import redis

DONE = "rqbench:done"


def noop():
    redis.Redis.from_url(os.environ["RQBENCH_URL"]).incr(DONE)


def main():
    from rq import Queue

    url, n, worker_class = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    r = redis.Redis.from_url(url)
    r.delete(DONE)
    q = Queue("rqbench", connection=r)
    q.empty()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from rq_noop import noop as job  # by its module name, not __main__

    for i in range(0, n, 1000):
        q.enqueue_many([Queue.prepare_data(job) for _ in range(min(1000, n - i))])
    env = {
        **os.environ,
        "RQBENCH_URL": url,
        "PYTHONPATH": os.path.dirname(os.path.abspath(__file__)),
    }
    cmd = [
        os.path.join(os.path.dirname(sys.executable), "rq"),
        "worker",
        "--burst",
        "-q",
        "--url",
        url,
        "-w",
        worker_class,
        "rqbench",
    ]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first = None
    while True:
        done = int(r.get(DONE) or 0)
        now = time.perf_counter()
        if done and first is None:
            first = (now, done)
        if done >= n or proc.poll() is not None:
            break
        time.sleep(0.005)
    end = time.perf_counter()
    proc.wait(60)
    done = int(r.get(DONE) or 0)
    print(
        json.dumps(
            {
                "done": done,
                "total_s": end - t0,
                "first": first[0] - t0 if first else None,
                "steady_jobs": done - (first[1] if first else 0),
                "steady_s": end - first[0] if first else None,
            }
        )
    )


if __name__ == "__main__":
    main()
