"""One drain of arq or taskiq for ``python -m bench.async_lane``, run with the peers' venv:

    python bench/async_peer.py arq|taskiq noop|sleep N PORT DB [--slots 100]

Enqueues N jobs (``noop``: one INCR; ``sleep``: ``await asyncio.sleep(0.05)``, then the
INCR), starts one worker process with ``--slots`` jobs at once, and prints one JSON line:
jobs/s from the first finished job to the last (the worker's start-up left out, as for
django_zqueue), or the rate within the time box.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
KIND, WORK, N, PORT, DB = (
    sys.argv[1],
    sys.argv[2],
    int(sys.argv[3]),
    int(sys.argv[4]),
    int(sys.argv[5]),
)
SLOTS = int(sys.argv[sys.argv.index("--slots") + 1]) if "--slots" in sys.argv else 100
SLEEP = 0.05
DONE = "asyncbench:done"
URL = f"redis://127.0.0.1:{PORT}/{DB}"

MODULE = """
import asyncio, os
import redis.asyncio as aredis
URL = os.environ["ABENCH_URL"]
_c = {}
def client():
    loop = id(asyncio.get_running_loop())
    if loop not in _c:
        _c[loop] = aredis.Redis.from_url(URL)
    return _c[loop]
async def body(seconds):
    if seconds:
        await asyncio.sleep(seconds)
    await client().incr("asyncbench:done")
"""

ARQ = (
    MODULE
    + """
from arq.connections import RedisSettings
async def job(ctx, seconds=0.0):
    await body(seconds)
class WorkerSettings:
    functions = [job]
    redis_settings = RedisSettings(host="127.0.0.1", port=int(os.environ["ABENCH_PORT"]),
                                   database=int(os.environ["ABENCH_DB"]))
    max_jobs = int(os.environ["ABENCH_SLOTS"])
    poll_delay = 0.01
    keep_result = 0
"""
)

TASKIQ = (
    MODULE
    + """
from taskiq_redis import RedisStreamBroker
broker = RedisStreamBroker(url=URL)
@broker.task
async def job(seconds: float = 0.0) -> None:
    await body(seconds)
"""
)


async def enqueue(seconds: float) -> None:
    if KIND == "arq":
        from arq import create_pool
        from arq.connections import RedisSettings

        pool = await create_pool(RedisSettings(host="127.0.0.1", port=PORT, database=DB))
        for i in range(0, N, 200):
            await asyncio.gather(
                *(pool.enqueue_job("job", seconds) for _ in range(min(200, N - i)))
            )
        await pool.aclose()
    else:
        import abench_taskiq as mod  # type: ignore[import-not-found]

        await mod.broker.startup()
        for i in range(0, N, 200):
            await asyncio.gather(*(mod.job.kiq(seconds) for _ in range(min(200, N - i))))
        await mod.broker.shutdown()


def main() -> None:
    work = Path(os.environ.get("ABENCH_DIR", "/tmp")) / f"abench-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    (work / "abench_arq.py").write_text(ARQ)
    (work / "abench_taskiq.py").write_text(TASKIQ)
    sys.path.insert(0, str(work))
    env = {
        **os.environ,
        "ABENCH_URL": URL,
        "ABENCH_PORT": str(PORT),
        "ABENCH_DB": str(DB),
        "ABENCH_SLOTS": str(SLOTS),
        "PYTHONPATH": str(work),
    }
    os.environ.update(env)
    r = redis.Redis(port=PORT, db=DB)
    r.flushdb()  # the peers' own db of the private server
    asyncio.run(enqueue(SLEEP if WORK == "sleep" else 0.0))
    bindir = Path(sys.executable).parent
    if KIND == "arq":
        cmd = [str(bindir / "arq"), "abench_arq.WorkerSettings"]
    else:
        cmd = [
            str(bindir / "taskiq"),
            "worker",
            "abench_taskiq:broker",
            "--workers",
            "1",
            "--max-async-tasks",
            str(SLOTS),
        ]
    proc = subprocess.Popen(
        cmd,
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    first = (0.0, 0)
    deadline = time.monotonic() + float(os.environ.get("ABENCH_TIMEOUT", "120"))
    done = 0
    while time.monotonic() < deadline:
        done = int(r.get(DONE) or 0)
        if done and not first[1]:
            first = (time.monotonic(), done)
        if done >= N:
            break
        time.sleep(0.005)
    end = time.monotonic()
    os.killpg(proc.pid, 15)
    proc.wait(30)
    rate = (done - first[1]) / (end - first[0]) if first[1] and end > first[0] else 0.0
    print(
        json.dumps(
            {
                "queue": KIND,
                "work": WORK,
                "n": N,
                "done": done,
                "slots": SLOTS,
                "jobs_per_s": round(rate, 1),
                "complete": done >= N,
            }
        )
    )


if __name__ == "__main__":
    main()
