"""What 1,000 people watching their place in line cost Redis: one shared poll per queue.

    python -m bench.position_watchers [--url redis://127.0.0.1:6379/0] [--watchers 1000]
                                      [--seconds 10] [--rate 10] [--json]

Fills a queue under a prefix of its own with ``2 x --watchers`` ready jobs; starts
``--watchers`` threads, each long-polling the position of its own job as the view does
(:meth:`django_zqueue.tasks.watch.Watch.wait` with the last version seen); meanwhile the main
thread claims and acks ``--rate`` jobs per second from the head of the line, so every
position changes ``--rate`` times a second. Counts the Redis commands and round trips the
watcher threads send (this process only, by wrapping redis-py's connection), and the
position changes they saw. The keys are UNLINKed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import uuid
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default=os.environ.get("ZQUEUE_REDIS_URL", "redis://127.0.0.1:6379/0"))
    ap.add_argument("--watchers", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=10.0, help="jobs acked per second")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not (1 <= a.watchers <= 5000 and 1 <= a.seconds <= 120 and 0 < a.rate <= 1000):
        ap.error("1 <= --watchers <= 5000, 1 <= --seconds <= 120, 0 < --rate <= 1000")
    sys.path.insert(0, ROOT)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")
    import django

    django.setup()
    from django.test.utils import override_settings
    from redis.connection import AbstractConnection

    from django_zqueue import get_queue
    from django_zqueue.tasks import watch

    prefix = f"zqbench-{uuid.uuid4().hex[:8]}"
    override = override_settings(
        ZQUEUE={"REDIS_URL": a.url, "PREFIX": prefix, "QUEUES": {"bench": {}}}
    )
    override.enable()
    q = get_queue("bench")
    counts = {"commands": 0, "round_trips": 0}
    send, pack = AbstractConnection.send_command, AbstractConnection.pack_commands

    def watcher_thread() -> bool:
        return threading.current_thread().name.startswith("watcher-")

    def send_command(conn: Any, *args: Any, **kwargs: Any) -> Any:
        if watcher_thread():
            counts["commands"] += 1
            counts["round_trips"] += 1
        return send(conn, *args, **kwargs)

    def pack_commands(conn: Any, commands: Any) -> Any:
        commands = list(commands)
        if watcher_thread():
            counts["commands"] += len(commands)
            counts["round_trips"] += 1
        return pack(conn, commands)

    results: dict[str, Any] = {"watchers": a.watchers, "seconds": a.seconds, "rate": a.rate}
    try:
        tags = q.publish_many([{"task": "bench.wait", "args": [i]} for i in range(2 * a.watchers)])
        mine = tags[a.watchers :]  # every watcher has a.watchers jobs ahead at the start
        w = watch.watch_of("bench")
        stop = threading.Event()
        changes = [0]

        def follow(tag: str) -> None:
            version = None
            while not stop.is_set():
                pos = w.wait(tag, version, timeout=2.0)
                if version is not None and pos.version != version:
                    changes[0] += 1
                version = pos.version

        threads = [
            threading.Thread(target=follow, args=(t,), name=f"watcher-{i}", daemon=True)
            for i, t in enumerate(mine)
        ]
        for t in threads:
            t.start()
        time.sleep(2.0)  # every watcher has its first answer
        AbstractConnection.send_command = send_command  # type: ignore[method-assign]
        AbstractConnection.pack_commands = pack_commands  # type: ignore[method-assign]
        reads0, changes[0], t0 = w.reads, 0, time.monotonic()
        acked = 0
        while time.monotonic() - t0 < a.seconds:
            for m in q.claim(1)[0]:
                q.ack(m)
                acked += 1
            time.sleep(1 / a.rate)
        elapsed = time.monotonic() - t0
        AbstractConnection.send_command = send  # type: ignore[method-assign]
        AbstractConnection.pack_commands = pack  # type: ignore[method-assign]
        stop.set()
        results.update(
            {
                "acked": acked,
                "reads_per_s": round((w.reads - reads0) / elapsed, 2),
                "commands_per_s": round(counts["commands"] / elapsed, 1),
                "round_trips_per_s": round(counts["round_trips"] / elapsed, 1),
                "changes_seen_per_s": round(changes[0] / elapsed, 1),
                "load_average_1m": round(os.getloadavg()[0], 2),
            }
        )
    finally:
        AbstractConnection.send_command = send  # type: ignore[method-assign]
        AbstractConnection.pack_commands = pack  # type: ignore[method-assign]
        q.engine._client.unlink(*q.engine._keys.all())
        override.disable()
    if a.json:
        print(json.dumps(results, indent=2))
    else:
        print(
            f"{a.watchers} watchers of one queue, {results['acked']} jobs acked in "
            f"{a.seconds:.0f} s: {results['round_trips_per_s']} round trips/s, "
            f"{results['commands_per_s']} Redis commands/s from the watchers "
            f"({results['reads_per_s']} shared reads/s); position changes delivered: "
            f"{results['changes_seen_per_s']}/s; load average {results['load_average_1m']}"
        )


if __name__ == "__main__":
    main()
